#include "sim/sim_domain.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "sim/guest_abi.hpp"
#include "sim/json_file.hpp"
#include "sim/pattern.hpp"
#include "util/runs.hpp"
#include "xendump/error.hpp"

namespace xendump::sim {

using nlohmann::json;

json domain_record(const DomainSpec& spec, const DomainDerived& d) {
    json j;
    j["spec"] = domain_spec_to_json(spec);
    j["shared_info_mfn"] = d.shared_info_mfn;
    j["p2m_pfns"] = d.p2m_pfns;
    j["entries_per_page"] = d.entries_per_page;
    j["frame_list_list_mfn"] = d.frame_list_list_mfn;
    j["top_table_mfn"] = d.top_table_mfn;
    j["max_pages"] = d.max_pages;
    j["shared_info_arch"] = d.shared_info_arch;
    return j;
}

namespace {

// The spec's ranges (sorted by start, within p2m_size; they may overlap) as
// disjoint runs, so that a page is looked up by util::run_holding.
std::vector<PfnRange> merged_ranges(const std::vector<PfnRange>& ranges) {
    std::vector<PfnRange> out;
    for (const PfnRange& r : ranges) {
        const uint64_t end = r.pfn + r.count;
        if (!out.empty() && r.pfn - out.back().pfn <= out.back().count) {
            out.back().count = std::max(out.back().count, end - out.back().pfn);
            continue;
        }
        out.push_back({r.pfn, end - r.pfn});
    }
    return out;
}

}  // namespace

SimDomain::SimDomain(const HostPaths& paths, uint32_t domid) {
    const auto path = paths.domain_json(domid);
    use_json_file(path, "cannot open the domain description", "corrupt domain description", [&](const json& j) {
        HostSpec one = parse_host_spec(json{{"domains", json::array({j.at("spec")})}}, paths.dir, path.string());
        spec_ = std::move(one.domains.at(0));
        derived_.shared_info_mfn = j.at("shared_info_mfn").get<uint64_t>();
        derived_.p2m_pfns = j.at("p2m_pfns").get<std::vector<uint64_t>>();
        derived_.entries_per_page = j.at("entries_per_page").get<uint64_t>();
        derived_.frame_list_list_mfn = j.at("frame_list_list_mfn").get<uint64_t>();
        derived_.top_table_mfn = j.at("top_table_mfn").get<uint64_t>();
        derived_.max_pages = j.at("max_pages").get<uint64_t>();
        derived_.shared_info_arch = j.at("shared_info_arch");
        return 0;
    });
    zero_runs_ = merged_ranges(spec_.zero_ranges);
    by_mfn_ = spec_.extents;
    std::sort(by_mfn_.begin(), by_mfn_.end(), [](auto& a, auto& b) { return a.mfn < b.mfn; });
    overlay_ = MappedFile(paths.overlay(domid));
    if (overlay_.size() != derived_.p2m_pfns.size() * kPageSize)
        throw Error("overlay size does not match the p2m_pfns of domain.json", paths.overlay(domid).string());
    MappedFile si(paths.shared_info(domid));
    shared_info_.resize(kPageSize);
    si.copy_out(0, kPageSize, shared_info_.data());
    if (spec_.is_pv()) {
        MappedFile p2m(paths.p2m_pages(domid));
        p2m_page_pfns_.resize(p2m.size() / 8);
        if (!p2m_page_pfns_.empty()) std::memcpy(p2m_page_pfns_.data(), p2m.data(), p2m_page_pfns_.size() * 8);
    }
    if (spec_.fill == FillKind::image) image_ = MappedFile(spec_.image);
}

uint64_t SimDomain::cr3() const {
    return derived_.top_table_mfn ? abi::mfn_to_cr3(derived_.top_table_mfn, spec_.guest_width) : 0;
}

bool SimDomain::holds_p2m_structure(uint64_t pfn) const {
    return std::binary_search(derived_.p2m_pfns.begin(), derived_.p2m_pfns.end(), pfn);
}

uint64_t SimDomain::overlay_offset(uint64_t structure_pfn) const {
    auto it = std::lower_bound(derived_.p2m_pfns.begin(), derived_.p2m_pfns.end(), structure_pfn);
    return static_cast<uint64_t>(it - derived_.p2m_pfns.begin()) * kPageSize;
}

std::optional<uint64_t> SimDomain::pfn_of_mfn(uint64_t mfn) const {
    const auto it = util::run_holding(by_mfn_, mfn, &Extent::mfn, &Extent::count);
    if (it == by_mfn_.end()) return std::nullopt;
    return it->pfn + (mfn - it->mfn);
}

bool SimDomain::in_zero_range(uint64_t pfn) const {
    return util::run_holding(zero_runs_, pfn, &PfnRange::pfn, &PfnRange::count) != zero_runs_.end();
}

std::pair<uint64_t, uint64_t> SimDomain::p2m_entry_location(uint64_t pfn) const {
    const uint64_t e = derived_.entries_per_page;
    return {p2m_page_pfns_.at(pfn / e), (pfn % e) * spec_.guest_width};
}

// Precedence: p2m structures (they replaced the content), zero_ranges, fill.
bool SimDomain::reads_as_zero(uint64_t pfn) const {
    if (!derived_.p2m_pfns.empty() && holds_p2m_structure(pfn)) return false;
    return (!spec_.zero_ranges.empty() && in_zero_range(pfn)) || spec_.fill == FillKind::zero;
}

const std::byte* SimDomain::page_in_place(uint64_t pfn) const {
    if (spec_.fill != FillKind::image || pfn >= image_.size() / kPageSize) return nullptr;
    if (!derived_.p2m_pfns.empty() && holds_p2m_structure(pfn)) return nullptr;
    if (reads_as_zero(pfn)) return nullptr;
    return image_.data() + pfn * kPageSize;
}

void SimDomain::read_page(uint64_t pfn, std::byte* out) const {
    if (!derived_.p2m_pfns.empty() && holds_p2m_structure(pfn)) {
        overlay_.copy_out(overlay_offset(pfn), kPageSize, out);
        return;
    }
    if (reads_as_zero(pfn)) {
        std::memset(out, 0, kPageSize);
        return;
    }
    switch (spec_.fill) {
        case FillKind::pattern: fill_pattern_page(spec_.domid, pfn, out); return;
        case FillKind::zero: std::memset(out, 0, kPageSize); return;
        case FillKind::image:
            if (pfn > UINT64_MAX / kPageSize) std::memset(out, 0, kPageSize);
            else image_.copy_out(pfn * kPageSize, kPageSize, out);
            return;
    }
}

}  // namespace xendump::sim
