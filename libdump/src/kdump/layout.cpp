#include "kdump/layout.hpp"

#include <algorithm>
#include <string>

#include "xendump/error.hpp"

namespace xendump::kdump {

namespace {
uint64_t blocks_for(uint64_t bytes) { return (bytes + kBlockSize - 1) / kBlockSize; }
}  // namespace

KdumpLayout plan_kdump(std::span<const PageEntry> entries, Index index, std::span<const PageEntry> present) {
    KdumpLayout L;
    L.index = index;
    for (size_t i = 1; i < entries.size(); ++i)
        if (entries[i].pfn <= entries[i - 1].pfn)
            throw Error("page entries not in strictly ascending pfn order at index " + std::to_string(i));
    uint64_t top = 0;
    for (const auto& e : entries) top = std::max(top, key_of(e, index));
    for (const auto& e : present) top = std::max(top, key_of(e, index));
    if (top >= (uint64_t{1} << 52)) throw Error("frame " + std::to_string(top) + " is too large for a kdump bitmap");
    L.max_mapnr = top + 1;
    // bitmap_blocks is a u32 in the header: 2^31 blocks of bits cover pfns far
    // beyond any guest (2^46), but a hostile list must not wrap it.
    const uint64_t each = blocks_for((L.max_mapnr + 7) / 8);
    if (each > (uint64_t{1} << 18)) throw Error("pfn " + std::to_string(L.max_mapnr - 1) + " is too large for a kdump bitmap");
    L.bitmap_size = each * kBlockSize;
    L.bitmap_offset = L.sub_header_offset + kBlockSize;  // sub_hdr_size = 1 block
    L.desc_offset = L.bitmap_offset + 2 * L.bitmap_size;
    L.zero_page_offset = (L.desc_offset + entries.size() * sizeof(PageDesc) + kBlockSize - 1) / kBlockSize * kBlockSize;
    L.data_offset = L.zero_page_offset + kBlockSize;
    return L;
}

std::vector<std::byte> key_bitmap(const KdumpLayout& layout, std::span<const PageEntry> entries) {
    std::vector<std::byte> bits(layout.bitmap_size);
    for (const auto& e : entries) set_bit(bits.data(), key_of(e, layout.index));
    return bits;
}

std::vector<uint64_t> descriptor_slots(std::span<const PageEntry> entries, Index index) {
    if (index == Index::pfn || gmfns_ascending(entries)) return {};
    std::vector<uint64_t> order(entries.size());
    for (uint64_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) { return entries[a].gmfn < entries[b].gmfn; });
    std::vector<uint64_t> slot(entries.size());
    for (uint64_t r = 0; r < order.size(); ++r) {
        if (r > 0 && entries[order[r]].gmfn == entries[order[r - 1]].gmfn)
            throw Error("pfns " + std::to_string(entries[order[r - 1]].pfn) + " and " + std::to_string(entries[order[r]].pfn) +
                        " share machine frame " + std::to_string(entries[order[r]].gmfn));
        slot[order[r]] = r;
    }
    return slot;
}

}  // namespace xendump::kdump
