// DumpReader accessors and page lookups (pfn: binary search of the runs;
// gmfn: binary search of an index sorted by gmfn, built once on first use).
#include <algorithm>
#include <future>

#include "reader/check_error.hpp"
#include "reader/checked.hpp"
#include "reader/reader_impl.hpp"
#include "kdump/kdump_file.hpp"

namespace xendump {

DumpReader::DumpReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DumpReader::DumpReader(DumpReader&&) noexcept = default;
DumpReader& DumpReader::operator=(DumpReader&&) noexcept = default;
DumpReader::~DumpReader() = default;

const std::filesystem::path& DumpReader::path() const { return impl_->path; }
FileFormat DumpReader::format() const { return impl_->format; }
uint64_t DumpReader::file_size() const { return impl_->file->size(); }
format::GuestType DumpReader::type() const { return impl_->type; }
unsigned DumpReader::guest_width() const { return impl_->guest_width; }
uint64_t DumpReader::nr_pages() const { return impl_->entries->size(); }
uint64_t DumpReader::page_size() const { return impl_->header.xch_page_size; }
const format::HeaderDesc& DumpReader::header() const { return impl_->header; }
const format::XenVersionDesc& DumpReader::xen_version() const { return impl_->xen_version; }
const KeyValues& DumpReader::domain() const { return impl_->domain; }
std::span<const PageEntry> DumpReader::entries() const { return *impl_->entries; }
const std::vector<PageRun>& DumpReader::runs() const { return impl_->runs; }
std::vector<VcpuContext> DumpReader::vcpus() const { return impl_->vcpus; }
std::optional<std::vector<std::byte>> DumpReader::shared_info() const { return impl_->shared_info; }
std::optional<std::string> DumpReader::vmcoreinfo() const { return impl_->vmcoreinfo; }
std::vector<uint64_t> DumpReader::unreadable_pfns() const { return impl_->unreadable; }
bool DumpReader::has_digests() const { return impl_->digest != nullptr; }
uint64_t DumpReader::pages_offset() const { return impl_->pages_offset; }

std::optional<KernelImageMapping> DumpReader::kernel_image_mapping() const {
    const auto& segs = impl_->elf.segments;
    if (impl_->format != FileFormat::v1 || segs.size() < 3) return std::nullopt;
    const auto& p = segs.back().phdr;
    if (p.p_type != PT_LOAD || p.p_vaddr == 0) return std::nullopt;
    return KernelImageMapping{p.p_vaddr, p.p_paddr, p.p_filesz, p.p_offset};
}

std::optional<uint64_t> DumpReader::index_of_pfn(uint64_t pfn) const {
    const auto& runs = impl_->runs;
    auto it = std::upper_bound(runs.begin(), runs.end(), pfn,
                               [](uint64_t p, const PageRun& r) { return p < r.first_pfn; });
    if (it == runs.begin()) return std::nullopt;
    --it;
    if (pfn - it->first_pfn >= it->count) return std::nullopt;
    return it->first_index + (pfn - it->first_pfn);
}

const std::vector<uint64_t>& DumpReader::Impl::gmfn_order() const {
    std::call_once(gmfn_once, [this] {
        const auto& e = *entries;
        by_gmfn.resize(e.size());
        for (uint64_t i = 0; i < e.size(); ++i) by_gmfn[i] = i;
        if (!gmfns_ascending(e))  // else already in gmfn order
            std::stable_sort(by_gmfn.begin(), by_gmfn.end(),
                             [&e](uint64_t a, uint64_t b) { return e[a].gmfn < e[b].gmfn; });
    });
    return by_gmfn;
}

std::optional<uint64_t> DumpReader::index_of_gmfn(uint64_t gmfn) const {
    if (impl_->type != format::GuestType::pv) return index_of_pfn(gmfn);
    const auto& e = *impl_->entries;
    const auto& order = impl_->gmfn_order();
    auto it = std::lower_bound(order.begin(), order.end(), gmfn,
                               [&e](uint64_t idx, uint64_t g) { return e[idx].gmfn < g; });
    if (it == order.end() || e[*it].gmfn != gmfn) return std::nullopt;
    return *it;
}

uint64_t DumpReader::page_offset(uint64_t index) const {
    const auto& d = *impl_;
    if (d.kdump) throw Error("a compact (kdump) file's pages are compressed: they have no fixed offset", d.file_name());
    if (index >= d.entries->size())
        throw Error("page index " + std::to_string(index) + " is past the table (" +
                        std::to_string(d.entries->size()) + " entries)",
                    d.file_name());
    const uint64_t rel = index * format::kPageSize;  // index < file size / 16: no overflow
    if (!reader::range_inside(rel, format::kPageSize, d.pages_size))
        throw Error(".xen_pages: page " + std::to_string(index) + " at " + reader::hex(d.pages_offset + rel) +
                        " is past the end of the section (" + reader::hex(d.pages_offset + d.pages_size) + ")",
                    d.file_name(), d.pages_offset + rel);
    return d.pages_offset + rel;
}

namespace {
void read_page_at(const DumpReader& r, const reader::DumpFile& f, uint64_t index, std::span<std::byte> out,
                  const kdump::KdumpFile* k, uint64_t kslot) {
    if (out.size() < format::kPageSize)
        throw Error("page buffer of " + std::to_string(out.size()) + " bytes is smaller than a page", f.path());
    if (k) return k->read_page(kslot, out);
    f.read_exact(r.page_offset(index), out.first(format::kPageSize), "page " + std::to_string(index));
}
}  // namespace

bool DumpReader::read_page_by_pfn(uint64_t pfn, std::span<std::byte> out) const {
    auto idx = index_of_pfn(pfn);
    if (!idx) return false;
    read_page_at(*this, *impl_->file, *idx, out, impl_->kdump.get(), impl_->kdump_desc(*idx));
    return true;
}

bool DumpReader::read_page_by_gmfn(uint64_t gmfn, std::span<std::byte> out) const {
    auto idx = index_of_gmfn(gmfn);
    if (!idx) return false;
    read_page_at(*this, *impl_->file, *idx, out, impl_->kdump.get(), impl_->kdump_desc(*idx));
    return true;
}

std::vector<Finding> DumpReader::verify(const VerifyOptions& options) const { return verify_report(options).findings; }

VerifyReport DumpReader::verify_report(const VerifyOptions& options) const {
    VerifyReport rep;
    rep.digests = !options.digests ? DigestCheck::skipped : impl_->digest ? DigestCheck::compared : DigestCheck::absent;
    std::vector<Finding>& out = rep.findings;
    out = impl_->open_findings;
    // The page digests (reads and hashing, most of the time) run while the
    // structural checks do; both only read the opened file. Findings keep
    // their order: structure first, then digests.
    std::future<std::vector<Finding>> digests;
    if (rep.digests == DigestCheck::compared && !impl_->kdump)  // check_kdump reads the pages once for both
        digests = std::async(std::launch::async, [this, &options] { return reader::check_digests(*impl_, options); });
    std::vector<Finding> more;
    try {
        more = impl_->kdump ? reader::check_kdump(*impl_, options) : reader::run_checks(*impl_, options);
    } catch (...) {
        if (digests.valid()) digests.wait();  // it uses *impl_: let it finish first
        throw;
    }
    out.insert(out.end(), more.begin(), more.end());
    if (digests.valid()) {
        auto dig = digests.get();
        out.insert(out.end(), dig.begin(), dig.end());
    }
    if (rep.digests == DigestCheck::absent && !options.allow_no_digests) out.push_back(reader::digests_absent(*impl_));
    return rep;
}

std::vector<Finding> DumpReader::verify_file(const std::filesystem::path& path, const VerifyOptions& options) {
    return verify_file_report(path, options).findings;
}

VerifyReport DumpReader::verify_file_report(const std::filesystem::path& path, const VerifyOptions& options) {
    try {
        return open(path).verify_report(options);
    } catch (const reader::CheckError& e) {
        return {{e.finding()}, DigestCheck::skipped};
    }
}

}  // namespace xendump
