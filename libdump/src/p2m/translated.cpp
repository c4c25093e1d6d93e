// HVM and PVH guests: the hypervisor translates, so pfn = gfn, and a gfn is
// present when the hypervisor's page type for it says so (XEN_DOMCTL_
// getpageframeinfo3, what Xen's save code asks, xg_sr_save.c): nothing is
// mapped to find out, so a dump maps each present page once, in its page
// pass. Asked in large batches (a 16 GiB guest is 4Mi gfns, 512 calls here,
// 4096 hypercalls of 1024). The VGA hole and the MMIO window below 4 GiB are
// skipped without asking, as xg_core_x86.c xc_core_arch_gpfn_may_present
// does: emulated or passed-through device memory is no guest RAM, and
// mapping it (the fallback below) could have side effects.
//
// One kind of page the types do not show: Xen's own pages that the guest
// placed in its physmap (XENMAPSPACE_shared_info, _grant_table). Xen types
// them XTAB (is_xen_heap_page), as they are not the guest's to migrate, but
// they map, and xl dump-core (which maps every gfn) keeps them: Linux HVM
// guests put shared_info on a low RAM gfn (enlighten_hvm.c
// reserve_shared_info), PVH guests their grant frames on ballooned-out RAM.
// So the XTAB gfns of a hole in RAM (between present gfns, at most kMapBatch
// of them) and of a short tail after the last present gfn are mapped to see
// which map: nothing in a guest that has no such hole, a few pages in one
// that has, and as before for a ballooned guest's scattered holes. Longer
// holes (the gap below the MMIO window, a large balloon) are not mapped.
//
// Where the scan ends. A guest's highest gfn is far above its RAM (Xen's
// special pages sit just below the MMIO window, 0xfeff8 for any HVM or PVH
// guest), so a 128 MiB guest would have ~950 000 gfns typed, 29 for each
// present one. Instead the scan ends once it has found every page that can
// be typed present: Xen types present only the gfns backed by the domain's
// own pages (counted in tot_pages) or by pages it shares (shr_pages, which
// tot_pages leaves out), both from the hypervisor, not from the guest. The
// device windows, never dumped, are typed first, so that the pages Xen or
// the device model put there (the special pages, video RAM) are counted.
// After the last page, kLongestHole more gfns are typed: a scan to the
// highest gfn finds no more, and maps the absent ones of a tail only when
// the highest gfn is that near, as before. A domain whose
// pages cannot all be found (a populate-on-demand cache, pages the guest
// handed to Xen) is scanned to its highest gfn, as before. What could end
// the scan too early: gfns typed present that are neither, which only
// p2m_map_foreign gives (a PVH or HVM domain privileged to map another's
// pages: a PVH dom0, a device-model domain), never a guest on its own.
#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>

#include "p2m/p2m_walk.hpp"
#include "xendump/error.hpp"

namespace xendump::p2m_detail {

namespace {

struct GfnRange {
    uint64_t first, end;  // [first, end)
};
// 0xa0000-0xbffff (VGA) and HVM_BELOW_4G_MMIO_START (0xf0000000) up to 4 GiB
// (xen/include/public/hvm/e820.h).
constexpr GfnRange kSkipped[] = {{0xa0, 0xc0}, {0xf0000, 0x100000}};

// The longest run of XTAB gfns whose gfns are mapped to look for Xen's pages.
constexpr size_t kLongestHole = kMapBatch;

}  // namespace

bool in_device_window(uint64_t gfn) {
    for (const GfnRange& r : kSkipped)
        if (gfn >= r.first && gfn < r.end) return true;
    return false;
}

void TranslatedProber::map_probe(std::span<const uint64_t> gfns, std::vector<PageEntry>& out) {
    if (gfns.empty()) return;
    // What maps is present: Xen fails an unpopulated gfn (and a broken page).
    auto m = hv_.map_foreign(domid_, gfns);
    for (size_t i = 0; i < m->count(); ++i)
        if (m->error(i) == 0) out.push_back({gfns[i], gfns[i]});
}

void TranslatedProber::typed(const std::vector<uint64_t>& gfns, const std::vector<GfnType>& types,
                             std::vector<PageEntry>& out) {
    std::vector<PageEntry> present;
    std::vector<uint64_t> holes;  // closed by a present gfn of this batch: mapped
    for (size_t i = 0; i < gfns.size(); ++i) {
        if (types[i] == GfnType::absent) {
            if (!in_ram_) continue;
            hole_.push_back(gfns[i]);
            if (hole_.size() > kLongestHole) {  // a gap, not a hole in RAM
                hole_.clear();
                in_ram_ = false;
            }
            continue;
        }
        // Present or broken: RAM, which closes the hole before it.
        holes.insert(holes.end(), hole_.begin(), hole_.end());
        hole_.clear();
        in_ram_ = true;
        if (types[i] == GfnType::present) {
            present.push_back({gfns[i], gfns[i]});
            // A broken page is not counted: it may no longer be the domain's.
            if (++found_ == owned_) stop_at_ = std::min(size_, gfns[i] + 1 + kLongestHole);
        }
        else
            broken_.add([&] { return "gfn " + hex(gfns[i]); });
    }
    std::vector<PageEntry> found;
    map_probe(holes, found);
    std::merge(present.begin(), present.end(), found.begin(), found.end(), std::back_inserter(out),
               [](const PageEntry& a, const PageEntry& b) { return a.pfn < b.pfn; });
}

bool TranslatedProber::with_types(const std::vector<uint64_t>& gfns,
                                  const std::function<void(const std::vector<GfnType>&)>& use) {
    try {
        const std::vector<GfnType> types = hv_.gfn_types(domid_, gfns);
        if (types.size() != gfns.size())
            throw Error("internal error: " + std::to_string(types.size()) + " page types for " +
                        std::to_string(gfns.size()) + " gfns", "domain " + std::to_string(domid_));
        use(types);
        return true;
    } catch (const Error& e) {
        // An Error without an errno is no refusal (a cancel): it goes on up.
        if (e.sys_errno() == 0) throw;
        refused_ = e.message() + ": " + std::strerror(e.sys_errno());  // the domain is the warning's
        return false;
    }
}

void TranslatedProber::probe(const std::vector<uint64_t>& gfns, std::vector<PageEntry>& out) {
    if (gfns.empty()) return;
    if (refused_.empty() && with_types(gfns, [&](const std::vector<GfnType>& types) { typed(gfns, types, out); }))
        return;
    // Refused: every gfn is probed by mapping it, as before page types were
    // asked (a hole pending from earlier types is within these gfns' reach no
    // more: it is mapped first, in order).
    // What maps cannot be counted against owned_ (Xen's pages map too): the
    // scan goes to the highest gfn.
    owned_ = 0;
    stop_at_ = UINT64_MAX;
    map_probe(hole_, out);
    hole_.clear();
    map_probe(gfns, out);
}

void TranslatedProber::count_device_windows() {
    windows_counted_ = true;
    if (owned_ == 0) return;
    std::vector<uint64_t> gfns;
    for (const GfnRange& r : kSkipped) {
        for (uint64_t gfn = r.first; gfn < std::min(r.end, size_); ++gfn) {
            gfns.push_back(gfn);
            if (gfns.size() == kMapBatch || gfn + 1 == std::min(r.end, size_)) {
                const bool answered = with_types(gfns, [&](const std::vector<GfnType>& types) {
                    found_ += std::count(types.begin(), types.end(), GfnType::present);
                });
                if (!answered) {
                    owned_ = 0;  // refused (refused_ says why): probe() maps instead
                    return;
                }
                gfns.clear();
            }
        }
    }
}

bool TranslatedProber::read_next(std::vector<PageEntry>& out, uint64_t count) {
    if (next_ >= size_) return false;
    if (!windows_counted_) count_device_windows();
    std::vector<uint64_t> gfns;
    gfns.reserve(kMapBatch);
    const uint64_t end = size_ - next_ > count ? next_ + count : size_;
    while (next_ < std::min(end, stop_at_)) {
        const GfnRange* skip = std::find_if(std::begin(kSkipped), std::end(kSkipped),
                                            [&](const GfnRange& r) { return next_ >= r.first && next_ < r.end; });
        if (skip != std::end(kSkipped)) {
            next_ = skip->end;
            continue;
        }
        gfns.push_back(next_++);
        if (gfns.size() == kMapBatch) {
            probe(gfns, out);
            gfns.clear();
        }
    }
    probe(gfns, out);
    if (next_ >= stop_at_) {  // every page found, and kLongestHole gfns after the last
        // Short of the highest gfn, those absent gfns are a gap, not a tail:
        // not mapped, as the scan to the highest gfn would not have.
        if (stop_at_ < size_) hole_.clear();
        next_ = size_;
    }
    if (next_ >= size_) {  // the short tail after the last present gfn
        map_probe(hole_, out);
        hole_.clear();
    }
    return true;
}

void TranslatedProber::add_warnings(std::vector<std::string>& warnings) const {
    if (broken_.count)
        warnings.push_back(counted(broken_, "gfns are broken pages (XEN_DOMCTL_PFINFO_BROKEN: memory with a "
                                            "machine-check error)",
                                   "they are left out of the dump, as holes, and never read"));
    if (!refused_.empty())
        warnings.push_back("the hypervisor refused the page-type query (" + refused_ +
                           "); the gfns were probed by mapping them instead (slower: a dump maps each present "
                           "page twice)");
}

void probe_translated(Hypervisor& hv, const DomainInfo& info, uint64_t p2m_size, P2mMap& map) {
    TranslatedProber prober(hv, info, p2m_size);
    while (prober.read_next(map.pages, UINT64_MAX)) {
    }
    prober.add_warnings(map.warnings);
}

}  // namespace xendump::p2m_detail
