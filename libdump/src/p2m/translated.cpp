// HVM and PVH guests: the hypervisor translates, so pfn = gfn and a gfn is
// present when it maps. Probed in large batches (a 16 GiB guest is 4Mi gfns,
// 512 mapping calls). The VGA hole and the MMIO window below 4 GiB are
// skipped without mapping, as xg_core_x86.c xc_core_arch_gpfn_may_present
// does: mapping emulated or passed-through device memory could have side
// effects.
#include <algorithm>

#include "p2m/p2m_walk.hpp"

namespace xendump::p2m_detail {

namespace {

struct GfnRange {
    uint64_t first, end;  // [first, end)
};
// 0xa0000-0xbffff (VGA) and HVM_BELOW_4G_MMIO_START (0xf0000000) up to 4 GiB
// (xen/include/public/hvm/e820.h).
constexpr GfnRange kSkipped[] = {{0xa0, 0xc0}, {0xf0000, 0x100000}};

}  // namespace

bool TranslatedProber::read_next(std::vector<PageEntry>& out, uint64_t count) {
    if (next_ >= size_) return false;
    std::vector<uint64_t> gfns;
    gfns.reserve(kMapBatch);
    auto flush = [&] {
        if (gfns.empty()) return;
        auto m = hv_.map_foreign(domid_, gfns);
        for (size_t i = 0; i < m->count(); ++i)
            if (m->error(i) == 0) out.push_back({gfns[i], gfns[i]});
        gfns.clear();
    };
    const uint64_t end = size_ - next_ > count ? next_ + count : size_;
    while (next_ < end) {
        const GfnRange* skip = std::find_if(std::begin(kSkipped), std::end(kSkipped),
                                            [&](const GfnRange& r) { return next_ >= r.first && next_ < r.end; });
        if (skip != std::end(kSkipped)) {
            next_ = skip->end;
            continue;
        }
        gfns.push_back(next_++);
        if (gfns.size() == kMapBatch) flush();
    }
    flush();
    return true;
}

void probe_translated(Hypervisor& hv, const DomainInfo& info, uint64_t p2m_size, P2mMap& map) {
    TranslatedProber prober(hv, info.domid, p2m_size);
    while (prober.read_next(map.pages, UINT64_MAX)) {
    }
}

}  // namespace xendump::p2m_detail
