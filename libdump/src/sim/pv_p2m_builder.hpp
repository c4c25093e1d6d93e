// Builds a PV guest's p2m inside its own memory, as a Linux PV guest keeps
// it: p2m pages (one entry per pfn: the mfn, or ~0 at guest width for a hole),
// the 3-level tree (frame-list pages and the list-of-lists root, anchored at
// shared_info.arch.pfn_to_mfn_frame_list_list) and/or the linear list (the
// p2m pages mapped virtually at p2m_vaddr through page tables rooted at
// p2m_cr3). Pages whose p2m range holds no present pfn share one "missing"
// page, as Linux's p2m_missing / p2m_mid_missing / p2m_missing_pte do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "sim/host_spec.hpp"

namespace xendump::sim {

class PvP2mPlan;

// The structures planned and placed, their bytes not yet made: no page is
// held in memory, so the plan of a 1 TiB guest (2 GiB of p2m structures)
// costs about 24 bytes per structure page (~0.05 byte per guest page).
struct PvP2mLayout {
    std::vector<uint64_t> structure_pfns;  // every page holding a p2m structure, ascending
    std::vector<uint64_t> p2m_page_pfns;   // [j] = pfn of the page holding p2m entries j*E…
    uint64_t entries_per_page = 0;         // E: 512 (width 8) or 1024 (width 4)
    uint64_t frame_list_list_mfn = 0;      // root of the tree, when built
    uint64_t top_table_mfn = 0;            // root of the linear list's page tables, when built
    // shared_info.arch values after overrides, at guest width.
    uint64_t max_pfn = 0;
    uint64_t pfn_to_mfn_frame_list_list = 0;
    uint64_t p2m_cr3 = 0;
    uint64_t p2m_vaddr = 0;
    uint64_t p2m_generation = 0;

    // Makes each structure page in turn (ascending pfn, one page buffer)
    // and hands it to `sink`.
    void for_each_page(const std::function<void(uint64_t pfn, const std::byte* page)>& sink) const;

    std::shared_ptr<const PvP2mPlan> plan;
};

// Throws Error (object "domain N") when the guest cannot hold its p2m.
PvP2mLayout build_pv_p2m(const DomainSpec& d);

// The 4096-byte shared_info page of a guest with these arch values (zeros
// for HVM/PVH, which keep no p2m there).
std::vector<std::byte> build_shared_info(const DomainSpec& d, const PvP2mLayout* layout);

}  // namespace xendump::sim
