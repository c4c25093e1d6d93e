// p2m discovery: picks the method (translated for HVM/PVH; for PV the linear
// list whenever p2m_cr3 is set, else the tree, as xg_core_x86.c does) and the
// p2m size, and gathers the warnings.
#include <algorithm>

#include "p2m/p2m.hpp"
#include "p2m/p2m_walk.hpp"
#include "xendump/error.hpp"

namespace xendump {

using namespace p2m_detail;

namespace {
constexpr uint64_t kCeiling = uint64_t{1} << 40;  // 52-bit guest physical space
// The pages Xen lets the domain hold: max_pages, or tot_pages above it.
uint64_t pages_allowed(const DomainInfo& info) { return std::min(std::max(info.tot_pages, info.max_pages), kCeiling); }
}  // namespace

uint64_t p2m_size_limit(const DomainInfo& info) {
    constexpr uint64_t kHoleAllowance = uint64_t{1} << 22;  // 16 GiB of pfns
    constexpr uint64_t kFloor = uint64_t{1} << 18;          // 1 GiB of pfns
    return std::clamp(2 * pages_allowed(info) + kHoleAllowance, kFloor, kCeiling);
}

namespace p2m_detail {

uint64_t domain_frames(const DomainInfo& info) {
    return pages_allowed(info) + std::min(info.shr_pages, kCeiling);
}

}  // namespace p2m_detail

namespace {

// The p2m size: the hypervisor's maximum gpfn + 1, lowered by the guest's
// max_pfn when that is smaller (Linux publishes the p2m length there), and
// bounded by p2m_size_limit(). For PV guests Xen derives the maximum gpfn
// from shared_info.arch.max_pfn (xen/arch/x86/mm.c domain_get_maximum_gpfn),
// so neither number is trusted alone.
uint64_t choose_p2m_size(Hypervisor& hv, const DomainInfo& info, std::optional<uint64_t> guest_max_pfn,
                         P2mMap& map) {
    const std::string object = "domain " + std::to_string(info.domid);
    const uint64_t max_gpfn = hv.maximum_gpfn(info.domid);
    uint64_t size = max_gpfn == ~uint64_t{0} ? max_gpfn : max_gpfn + 1;
    if (guest_max_pfn) {
        if (*guest_max_pfn == 0)
            map.warnings.push_back("shared_info max_pfn is 0; using the hypervisor's maximum gpfn + 1 (" +
                                   hex(size) + ")");
        else if (*guest_max_pfn < size)
            size = *guest_max_pfn;
        else if (*guest_max_pfn > size)
            map.warnings.push_back("shared_info max_pfn " + hex(*guest_max_pfn) +
                                   " is larger than the hypervisor's maximum gpfn + 1 (" + hex(size) +
                                   "); using the latter");
    }
    const uint64_t limit = p2m_size_limit(info);
    if (size > limit) {
        map.warnings.push_back("p2m size " + hex(size) + " is implausible for a domain of " +
                               std::to_string(std::max(info.tot_pages, info.max_pages)) +
                               " pages; only pfns below " + hex(limit) + " are examined");
        size = limit;
    }
    return size;
}

std::vector<std::byte> read_shared_info(Hypervisor& hv, const DomainInfo& info, const std::string& object) {
    const uint64_t frame = info.shared_info_frame;
    auto m = hv.map_foreign(info.domid, std::span(&frame, 1));
    if (m->count() != 1 || m->error(0) != 0)
        throw Error("cannot map shared_info (mfn " + hex(frame) + ")", object, std::nullopt,
                    m->count() == 1 ? m->error(0) : 0);
    return std::vector<std::byte>(m->page(0), m->page(0) + format::kPageSize);
}

void add_structure_warnings(const Walk& walk, P2mMap& map) {
    if (walk.unmappable_structure.count)
        map.warnings.push_back(counted(walk.unmappable_structure, "p2m structure pages could not be mapped",
                                       "the pfns below them are treated as holes"));
    if (walk.bad_structure_entry.count)
        map.warnings.push_back(counted(walk.bad_structure_entry,
                                       "p2m structure entries hold values that are not machine frames",
                                       "the pfns below them are treated as holes"));
}

}  // namespace

namespace p2m_detail {

PvStart start_pv(Hypervisor& hv, const DomainInfo& info, P2mMap& map) {
    const std::string object = "domain " + std::to_string(info.domid);
    const unsigned width = hv.guest_width(info.domid);
    if (width != 4 && width != 8)
        throw Error("unsupported guest width " + std::to_string(width) + " bytes", object);
    map.guest_width = width;
    map.shared_info = read_shared_info(hv, info, object);
    const ArchSharedInfo arch = parse_arch_shared_info(map.shared_info, width);

    uint64_t size = choose_p2m_size(hv, info, arch.max_pfn, map);
    PvStart st{Walk{hv, info.domid, width, size, object, {}, {}, {}}, {}, arch};
    Walk& walk = st.walk;
    walk.frames_owned = domain_frames(info);
    std::vector<uint64_t>& frames = st.frames;
    if (arch.p2m_cr3 != 0) {
        map.kind = format::P2mKind::linear;
        try {
            frames = linear_p2m_frames(walk, arch.p2m_cr3, arch.p2m_vaddr);
        } catch (const Error& e) {
            // A kernel that keeps both (Linux before 4.14 style) can still be
            // read through its tree.
            if (walk.invalid_entry(arch.frame_list_list) || arch.frame_list_list == 0) throw;
            map.warnings.push_back("the linear p2m cannot be walked (" + e.message() + "); using the p2m tree");
            walk.roles.clear();
            walk.unmappable_structure = {};
            walk.bad_structure_entry = {};
            frames.clear();
        }
    }
    if (frames.empty()) {
        map.kind = format::P2mKind::tree;
        // The tree has three levels of PAGE_SIZE/width entries.
        const uint64_t fpp = walk.entries_per_page();
        if (walk.p2m_size > fpp * fpp * fpp) {
            map.warnings.push_back("p2m size " + hex(walk.p2m_size) + " exceeds what a p2m tree can hold; using " +
                                   hex(fpp * fpp * fpp));
            walk.p2m_size = fpp * fpp * fpp;
        }
        frames = tree_p2m_frames(walk, arch.frame_list_list);
    }
    map.p2m_size = walk.p2m_size;
    return st;
}

void finish_pv(const PvStart& st, const DomainInfo& info, P2mMap& map) {
    add_structure_warnings(st.walk, map);
    // A live guest may rewrite its p2m while we read it; Linux bumps
    // p2m_generation around every change (arch-x86/xen.h).
    const ArchSharedInfo after =
        parse_arch_shared_info(read_shared_info(st.walk.hv, info, st.walk.object), st.walk.width);
    if (after.p2m_generation != st.arch.p2m_generation)
        map.warnings.push_back("the guest changed its p2m during discovery (p2m_generation " +
                               std::to_string(st.arch.p2m_generation) + " -> " +
                               std::to_string(after.p2m_generation) + ")");
}

void start_translated(Hypervisor& hv, const DomainInfo& info, P2mMap& map) {
    map.kind = format::P2mKind::translated;
    map.guest_width = 8;
    map.p2m_size = choose_p2m_size(hv, info, std::nullopt, map);
}

void check_not_empty(const P2mMap& map, uint64_t pages, uint32_t domid) {
    if (pages == 0)
        throw Error("no present page found in " + std::string(to_string(map.kind)) + " p2m of size " +
                        hex(map.p2m_size),
                    "domain " + std::to_string(domid));
}

}  // namespace p2m_detail

namespace {

void discover_pv(Hypervisor& hv, const DomainInfo& info, const P2mOptions& options, P2mMap& map) {
    PvStart st = start_pv(hv, info, map);
    read_p2m_entries(st.walk, st.frames, options, map);
    finish_pv(st, info, map);
}

}  // namespace

P2mMap discover_p2m(Hypervisor& hv, const DomainInfo& info, const P2mOptions& options) {
    P2mMap map;
    if (info.hvm) {
        start_translated(hv, info, map);
        probe_translated(hv, info, map.p2m_size, map);
    } else {
        discover_pv(hv, info, options, map);
    }
    check_not_empty(map, map.pages.size(), info.domid);
    return map;
}

}  // namespace xendump
