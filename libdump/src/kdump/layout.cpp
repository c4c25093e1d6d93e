#include "kdump/layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <string>

#include "io/sealed_temp_file.hpp"
#include "kdump/heads.hpp"
#include "stream_hash.hpp"
#include "reader/dump_file.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::kdump {

namespace {

constexpr uint64_t kWindow = 65536;          // entries read at a time (1 MiB)
constexpr uint64_t kBitmapChunk = 1u << 20;  // bitmap bytes written at a time (8 Mi frames)

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
    const uint64_t each = bitmap_blocks_for(L.max_mapnr) / 2;
    if (each > (uint64_t{1} << 18)) throw Error("pfn " + std::to_string(L.max_mapnr - 1) + " is too large for a kdump bitmap");
    L.bitmap_size = each * kBlockSize;
    L.bitmap_offset = L.sub_header_offset + kBlockSize;  // sub_hdr_size = 1 block
    L.desc_offset = L.bitmap_offset + 2 * L.bitmap_size;
    L.zero_page_offset =
        (L.desc_offset + stored.nr_entries() * sizeof(PageDesc) + kBlockSize - 1) / kBlockSize * kBlockSize;
    L.data_offset = L.zero_page_offset + kBlockSize;
    return L;
}

void for_each_bitmap_chunk(const KdumpLayout& layout, const PageSource& entries, bool ascending,
                           const std::function<void(uint64_t lo, std::span<const std::byte> chunk)>& put,
                           const std::function<void(const PageEntry&)>& twice) {
    std::vector<std::byte> chunk;
    uint64_t from = 0;  // ascending: the first entry past the chunks made
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
                if (twice && test_bit(chunk.data(), key - first_key)) twice(w[k]);
                set_bit(chunk.data(), key - first_key);
                any = true;
            }
            return true;
        });
        if (ascending) from = stop;
        if (any) put(lo, chunk);
    }
}

namespace {

// XXH3-128 of a bitmap of `size` bytes given as the chunks that hold a set
// bit, in rising order: the bytes between them are zeros.
class BitmapHash {
public:
    explicit BitmapHash(uint64_t size) : size_(size) {}
    void add(uint64_t lo, std::span<const std::byte> chunk) {
        zeros_to(lo);
        hash_.update(chunk.data(), chunk.size());
        at_ = lo + chunk.size();
    }
    XXH128_canonical_t finish() {
        zeros_to(size_);
        return hash_.finish_and_reset();
    }

private:
    void zeros_to(uint64_t end) {
        static const std::vector<std::byte> zeros(1 << 16);
        for (; at_ < end; at_ += std::min<uint64_t>(zeros.size(), end - at_))
            hash_.update(zeros.data(), static_cast<size_t>(std::min<uint64_t>(zeros.size(), end - at_)));
    }
    StreamHash hash_;
    uint64_t size_, at_ = 0;
};

}  // namespace

XXH128_canonical_t write_key_bitmap(io::Sink& out, uint64_t at, const KdumpLayout& layout, const PageSource& entries,
                                    bool ascending) {
    BitmapHash hash(layout.bitmap_size);
    for_each_bitmap_chunk(layout, entries, ascending, [&](uint64_t lo, std::span<const std::byte> chunk) {
        out.write_at(at + lo, chunk);
        hash.add(lo, chunk);
    });
    return hash.finish();
}

namespace {

// The bitmap of `stored`'s machine frames in an unnamed temporary file,
// refusing two pfns that share a frame.
BitmapOnDisk frames_on_disk(const PageSource& stored, const KdumpLayout& layout) {
    if (layout.index != Index::machine) throw Error("internal error: descriptor ranks of pfns");
    // Sealed (io/sealed_temp_file.hpp): which frames a guest has are not left on disk in clear.
    auto f = std::make_shared<io::SealedTempFile>("a bitmap of the machine frames");
    for_each_bitmap_chunk(
        layout, stored, false, [&](uint64_t lo, std::span<const std::byte> chunk) { f->write(lo, chunk.data(), chunk.size()); },
        [&](const PageEntry& e) {
            // The other pfn of this frame (the first), for the message.
            uint64_t other = 0;
            for_each_entry_window_from(stored, 0, [&](uint64_t, std::span<const PageEntry> v) {
                for (const auto& o : v)
                    if (o.gmfn == e.gmfn) {
                        other = o.pfn;
                        return false;
                    }
                return true;
            });
            throw Error("pfns " + std::to_string(other) + " and " + std::to_string(e.pfn) + " share machine frame " +
                        std::to_string(e.gmfn));
        });
    return BitmapOnDisk(std::move(f), layout.bitmap_size, layout.max_mapnr, "bitmap of the machine frames");
}

}  // namespace

KeyRanks::KeyRanks(const PageSource& stored, const KdumpLayout& layout) : bitmap_(frames_on_disk(stored, layout)) {}

uint64_t KeyRanks::rank(uint64_t gmfn) {
    if (gmfn >= bitmap_.frames())
        throw Error("internal error: machine frame " + std::to_string(gmfn) + " past the bitmap");
    // Both frames stored: the one above the other is its next.
    if (last_ != ~uint64_t{0} && gmfn == last_ + 1)
        last_rank_ += 1;
    else if (last_ != ~uint64_t{0} && gmfn + 1 == last_)
        last_rank_ -= 1;
    else
        last_rank_ = bitmap_.rank(gmfn);
    last_ = gmfn;
    return last_rank_;
}

XXH128_canonical_t KeyRanks::write_to(io::Sink& out, uint64_t at) const {
    BitmapHash hash(bitmap_.bytes());
    std::vector<std::byte> chunk;
    for (uint64_t lo = 0; lo < bitmap_.bytes(); lo += kBitmapChunk) {
        const uint64_t n = std::min(kBitmapChunk, bitmap_.bytes() - lo);
        if (bitmap_.rank(lo * 8) == bitmap_.rank((lo + n) * 8)) continue;  // no frame there
        chunk.resize(static_cast<size_t>(n));
        bitmap_.read(lo, chunk);
        out.write_at(at + lo, chunk);
        hash.add(lo, chunk);
    }
    return hash.finish();
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
