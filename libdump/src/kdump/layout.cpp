#include "kdump/layout.hpp"

#include <algorithm>
#include <bit>
#include <string>

#include "xendump/error.hpp"

namespace xendump::kdump {

namespace {

constexpr uint64_t kWindow = 65536;          // entries read at a time (1 MiB)
constexpr uint64_t kBitmapChunk = 1u << 20;  // bitmap bytes written at a time (8 Mi frames)

uint64_t blocks_for(uint64_t bytes) { return (bytes + kBlockSize - 1) / kBlockSize; }

struct KeyScan {
    uint64_t top = 0;
    bool ascending = true;
};

KeyScan scan_keys(const PageSource& source, Index index) {
    KeyScan s;
    bool any = false;
    uint64_t last = 0;
    for_each_entry_window_from(source, 0, [&](uint64_t, std::span<const PageEntry> w) {
        for (const auto& e : w) {
            const uint64_t k = key_of(e, index);
            if (any && k <= last) s.ascending = false;
            s.top = std::max(s.top, k);
            last = k;
            any = true;
        }
        return true;
    });
    return s;
}

}  // namespace

KdumpLayout plan_kdump(const PageSource& stored, Index index, const PageSource* present) {
    KdumpLayout L;
    L.index = index;
    const KeyScan s = scan_keys(stored, index);
    const KeyScan p = present ? scan_keys(*present, index) : s;
    L.stored_ascending = s.ascending;
    L.present_ascending = p.ascending;
    const uint64_t top = std::max(s.top, p.top);
    if (top >= (uint64_t{1} << 52)) throw Error("frame " + std::to_string(top) + " is too large for a kdump bitmap");
    L.max_mapnr = top + 1;
    // bitmap_blocks is a u32 in the header: 2^31 blocks of bits cover pfns far
    // beyond any guest (2^46), but a hostile list must not wrap it.
    const uint64_t each = blocks_for((L.max_mapnr + 7) / 8);
    if (each > (uint64_t{1} << 18)) throw Error("pfn " + std::to_string(L.max_mapnr - 1) + " is too large for a kdump bitmap");
    L.bitmap_size = each * kBlockSize;
    L.bitmap_offset = L.sub_header_offset + kBlockSize;  // sub_hdr_size = 1 block
    L.desc_offset = L.bitmap_offset + 2 * L.bitmap_size;
    L.zero_page_offset =
        (L.desc_offset + stored.nr_entries() * sizeof(PageDesc) + kBlockSize - 1) / kBlockSize * kBlockSize;
    L.data_offset = L.zero_page_offset + kBlockSize;
    return L;
}

void write_key_bitmap(io::Sink& out, uint64_t at, const KdumpLayout& layout, const PageSource& entries,
                      bool ascending) {
    std::vector<std::byte> chunk;
    uint64_t from = 0;  // ascending: the first entry past the chunks written
    for (uint64_t lo = 0; lo < layout.bitmap_size; lo += kBitmapChunk) {
        const uint64_t n = std::min(kBitmapChunk, layout.bitmap_size - lo);
        const uint64_t first_key = lo * 8, end_key = (lo + n) * 8;
        chunk.assign(static_cast<size_t>(n), std::byte{0});
        bool any = false;
        uint64_t stop = entries.nr_entries();
        for_each_entry_window_from(entries, from, [&](uint64_t first, std::span<const PageEntry> w) {
            for (size_t k = 0; k < w.size(); ++k) {
                const uint64_t key = key_of(w[k], layout.index);
                if (ascending && key >= end_key) {
                    stop = first + k;
                    return false;
                }
                if (key < first_key || key >= end_key) continue;
                set_bit(chunk.data(), key - first_key);
                any = true;
            }
            return true;
        });
        if (ascending) from = stop;
        if (any) out.write_at(at + lo, chunk);
    }
}

KeyRanks::KeyRanks(const PageSource& stored, uint64_t max_mapnr) : words_(static_cast<size_t>((max_mapnr + 63) / 64)) {
    for_each_entry_window_from(stored, 0, [&](uint64_t, std::span<const PageEntry> w) {
        for (const auto& e : w) {
            if (e.gmfn >= max_mapnr) throw Error("internal error: machine frame " + std::to_string(e.gmfn) + " past the bitmap");
            uint64_t& word = words_[e.gmfn / 64];
            const uint64_t bit = uint64_t{1} << (e.gmfn % 64);
            if (word & bit) {
                // The other pfn of this frame, for the message.
                uint64_t other = 0;
                for_each_entry_window_from(stored, 0, [&](uint64_t, std::span<const PageEntry> v) {
                    for (const auto& o : v)
                        if (o.gmfn == e.gmfn) {
                            other = o.pfn;
                            return false;
                        }
                    return true;
                });
                throw Error("pfns " + std::to_string(other) + " and " + std::to_string(e.pfn) +
                            " share machine frame " + std::to_string(e.gmfn));
            }
            word |= bit;
        }
        return true;
    });
    before_.reserve(words_.size() / 8 + 1);
    uint64_t count = 0;
    for (size_t w = 0; w < words_.size(); ++w) {
        if (w % 8 == 0) before_.push_back(count);
        count += static_cast<uint64_t>(std::popcount(words_[w]));
    }
}

uint64_t KeyRanks::rank(uint64_t gmfn) const {
    const uint64_t w = gmfn / 64;
    if (w >= words_.size()) throw Error("internal error: machine frame " + std::to_string(gmfn) + " past the bitmap");
    uint64_t r = before_[w / 8];
    for (uint64_t i = w / 8 * 8; i < w; ++i) r += static_cast<uint64_t>(std::popcount(words_[i]));
    return r + static_cast<uint64_t>(std::popcount(words_[w] & ((uint64_t{1} << (gmfn % 64)) - 1)));
}

const PageEntry& EntryCursor::at(uint64_t i) {
    if (i < first_ || i - first_ >= window_.size()) {
        if (i >= n_) throw Error("internal error: entry " + std::to_string(i) + " of " + std::to_string(n_));
        first_ = i;
        window_.resize(static_cast<size_t>(std::min(n_ - i, kWindow)));
        source_.read_entries(i, window_);
    }
    return window_[i - first_];
}

}  // namespace xendump::kdump
