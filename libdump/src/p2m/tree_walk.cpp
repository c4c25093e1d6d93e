// The three-level p2m tree a PV guest publishes in
// shared_info.arch.pfn_to_mfn_frame_list_list: one page of frame-list mfns,
// frame-list pages of p2m-page mfns, p2m pages of entries. Each level holds
// PAGE_SIZE / guest_width words (xg_core_x86.c: FPP, P2M_FLL_ENTRIES).
#include "p2m/p2m_walk.hpp"
#include "xendump/error.hpp"

namespace xendump::p2m_detail {

namespace {

// One word of a structure page: a usable mfn, or kNoFrame (an ordinary hole
// for ~0 and 0, a counted anomaly for anything else implausible).
uint64_t structure_entry(Walk& walk, const std::vector<std::byte>& page, uint64_t index,
                         std::string_view role, uint64_t page_mfn) {
    uint64_t value = read_word(page.data(), index, walk.width);
    if (walk.invalid_entry(value) || value == 0) return kNoFrame;
    if (!walk.plausible_mfn(value)) {
        walk.bad_structure_entry.add([&] {
            return std::string(role) + " mfn " + hex(page_mfn) + " entry " + std::to_string(index) +
                   " holds " + hex(value);
        });
        return kNoFrame;
    }
    return value;
}

}  // namespace

std::vector<uint64_t> tree_p2m_frames(Walk& walk, uint64_t frame_list_list) {
    if (walk.invalid_entry(frame_list_list) || frame_list_list == 0)
        throw Error("the guest has published no p2m: pfn_to_mfn_frame_list_list is " + hex(frame_list_list) +
                        " and p2m_cr3 is 0 (has the kernel booted?)",
                    walk.object);
    if (!walk.plausible_mfn(frame_list_list))
        throw Error("pfn_to_mfn_frame_list_list " + hex(frame_list_list) + " is not a machine frame",
                    walk.object);

    const uint64_t fpp = walk.entries_per_page();
    const uint64_t nr_p2m_pages = walk.p2m_pages();
    const uint64_t nr_frame_lists = (nr_p2m_pages + fpp - 1) / fpp;  // <= fpp: caller clamps p2m_size

    const uint64_t root_mfn = frame_list_list;
    auto root = read_structure_pages(walk, std::span(&root_mfn, 1), "p2m frame list list");
    auto root_page = root.find(root_mfn);
    if (root_page == root.end())
        throw Error("cannot map the p2m frame list list (mfn " + hex(root_mfn) + ")", walk.object);

    std::vector<uint64_t> list_mfns(nr_frame_lists);
    for (uint64_t i = 0; i < nr_frame_lists; ++i)
        list_mfns[i] = structure_entry(walk, root_page->second, i, "p2m frame list list", root_mfn);

    auto lists = read_structure_pages(walk, list_mfns, "p2m frame list");
    std::vector<uint64_t> frames(nr_p2m_pages, kNoFrame);
    for (uint64_t j = 0; j < nr_p2m_pages; ++j) {
        uint64_t list_mfn = list_mfns[j / fpp];
        if (list_mfn == kNoFrame) continue;
        auto list = lists.find(list_mfn);
        if (list == lists.end()) continue;
        frames[j] = structure_entry(walk, list->second, j % fpp, "p2m frame list", list_mfn);
    }
    return frames;
}

}  // namespace xendump::p2m_detail
