// Where every part of a kdump file goes, from the list of pages alone
// (known before the first page is read): header, sub header, the two
// bitmaps, the descriptor table, the shared zero page, then the page data
// and, once the pages are written, the note area.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kdump/format.hpp"
#include "xendump/page_source.hpp"

namespace xendump::kdump {

// The frame a page is filed under in the bitmaps and the descriptor table:
// its pfn, or for a PV guest its machine frame (gmfn), so that crash reads
// the file as it reads a Xen dom0's kdump file, translating the guest's
// pseudo-physical addresses through the guest's own p2m (xen-dump-core(5)).
enum class Index { pfn, machine };
inline uint64_t key_of(const PageEntry& e, Index by) { return by == Index::machine ? e.gmfn : e.pfn; }

struct KdumpLayout {
    Index index = Index::pfn;
    uint64_t max_mapnr = 0;         // last key + 1
    uint64_t sub_header_offset = kBlockSize;
    uint64_t bitmap_offset = 0;     // the 1st bitmap; the 2nd follows it
    uint64_t bitmap_size = 0;       // of each bitmap, whole blocks
    uint64_t desc_offset = 0;       // PageDesc table, one per page
    uint64_t zero_page_offset = 0;  // the one stored zero page (raw), block-aligned
    uint64_t data_offset = 0;       // the other pages' data, in pfn order

    uint32_t bitmap_blocks() const { return static_cast<uint32_t>(2 * bitmap_size / kBlockSize); }
};

// `present`: the pages that exist when `entries` (those stored) are a
// selection of them (a dump level); empty: the same.
KdumpLayout plan_kdump(std::span<const PageEntry> entries, Index index, std::span<const PageEntry> present = {});

// The bitmap of `entries`' keys (layout.bitmap_size bytes).
std::vector<std::byte> key_bitmap(const KdumpLayout& layout, std::span<const PageEntry> entries);

// Each entry's slot in the descriptor table (ascending key order); empty
// when that is the entry's own index (pfn order, or gmfns that rise with
// the pfns). Throws Error when two entries share a key.
std::vector<uint64_t> descriptor_slots(std::span<const PageEntry> entries, Index index);

}  // namespace xendump::kdump
