// A PV guest's p2m read again after discovery (p2m_recheck.hpp), with the
// walks and the entry rules of discovery itself.
#include "p2m/p2m_recheck.hpp"

#include "p2m/p2m_walk.hpp"

namespace xendump {

using namespace p2m_detail;

namespace {

Walk walk_of(Hypervisor& hv, uint32_t domid, const PvP2mShape& shape) {
    return Walk{hv, domid, shape.width, shape.p2m_size, "domain " + std::to_string(domid), {}, {}, {}};
}

}  // namespace

PvP2mAnchor pv_p2m_anchor(std::span<const std::byte> shared_info, unsigned width) {
    const ArchSharedInfo a = parse_arch_shared_info(shared_info, width);
    return {a.max_pfn, a.frame_list_list, a.p2m_cr3, a.p2m_vaddr, a.p2m_generation};
}

std::vector<uint64_t> pv_p2m_leaf_frames(Hypervisor& hv, uint32_t domid, const PvP2mShape& shape,
                                         const PvP2mAnchor& anchor) {
    static_assert(PvP2mShape::kNoLeaf == kNoFrame);
    Walk walk = walk_of(hv, domid, shape);
    if (shape.kind == format::P2mKind::linear) return linear_p2m_frames(walk, anchor.p2m_cr3, anchor.p2m_vaddr);
    return tree_p2m_frames(walk, anchor.frame_list_list);
}

void for_each_p2m_entry(const PvP2mShape& shape, uint64_t leaf, const std::byte* page,
                        const std::function<void(uint64_t pfn, std::optional<uint64_t> frame)>& visit) {
    // The rules of EntryReader::read_next: ~0 is a hole, a value that names
    // no machine frame is left out.
    const uint64_t per_page = shape.entries_per_page();
    for (uint64_t k = 0; k < per_page; ++k) {
        const uint64_t pfn = leaf * per_page + k;
        if (pfn >= shape.p2m_size) break;
        std::optional<uint64_t> frame;
        if (page) {
            const uint64_t value = read_word(page, k, shape.width);
            if (!invalid_p2m_entry(value, shape.width) && plausible_frame(value, shape.width)) frame = value;
        }
        visit(pfn, frame);
    }
}

bool translated_gfn_never_dumped(uint64_t gfn) { return in_device_window(gfn); }

}  // namespace xendump
