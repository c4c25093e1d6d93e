// A PV guest's p2m read again after discovery (issue 35, a consistent live
// dump's layout check): its structure walked again from a later shared_info,
// and the entries of one p2m page as discovery reads them, so that the
// pre-copy can tell whether the pages the dump holds are still the guest's.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "xendump/format.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump {

// shared_info.arch's p2m fields (xen/include/public/arch-x86/xen.h).
struct PvP2mAnchor {
    uint64_t max_pfn = 0;
    uint64_t frame_list_list = 0;
    uint64_t p2m_cr3 = 0;
    uint64_t p2m_vaddr = 0;
    uint64_t p2m_generation = 0;
    bool same_structure(const PvP2mAnchor& o) const {
        return max_pfn == o.max_pfn && frame_list_list == o.frame_list_list && p2m_cr3 == o.p2m_cr3 &&
               p2m_vaddr == o.p2m_vaddr;
    }
};
PvP2mAnchor pv_p2m_anchor(std::span<const std::byte> shared_info, unsigned width);

// What discovery walked: the walk's kind (the linear list, or the tree),
// the guest width, the pfns examined, and the frame of each p2m page.
struct PvP2mShape {
    format::P2mKind kind = format::P2mKind::tree;
    unsigned width = 8;
    uint64_t p2m_size = 0;
    std::vector<uint64_t> leaf_frames;  // p2m page j's mfn; kNoLeaf: none
    static constexpr uint64_t kNoLeaf = ~uint64_t{0};
    uint64_t entries_per_page() const { return format::kPageSize / width; }
};

// The p2m pages' frames walked again the way `shape` was (upper levels
// only: the root and frame lists, or the linear list's page tables), from
// the fields of `anchor`. Errors as discovery's walk.
std::vector<uint64_t> pv_p2m_leaf_frames(Hypervisor& hv, uint32_t domid, const PvP2mShape& shape,
                                         const PvP2mAnchor& anchor);

// The entries of p2m page `leaf` (`page`: its 4096 bytes, or null for a
// page that is none or did not map: holes), as discovery keeps them:
// visit(pfn, frame) for each pfn below shape.p2m_size, frame nullopt for a
// hole or a value that names no machine frame.
void for_each_p2m_entry(const PvP2mShape& shape, uint64_t leaf, const std::byte* page,
                        const std::function<void(uint64_t pfn, std::optional<uint64_t> frame)>& visit);

// HVM/PVH: whether discovery leaves `gfn` out whatever it holds (a device
// window: the VGA hole, the MMIO window below 4 GiB).
bool translated_gfn_never_dumped(uint64_t gfn);

}  // namespace xendump
