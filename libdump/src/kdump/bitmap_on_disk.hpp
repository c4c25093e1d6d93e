// A kdump bitmap where it lies, in the file (bit i&7 of byte i>>3 is frame
// i): read in blocks through a small cache, with the count of set bits
// before each block kept in memory (8 bytes for 32768 frames, 128 MiB of
// guest), so rank (a stored page's descriptor slot) and select (the frame
// of a slot) cost one cached block and nothing grows with the guest but
// that index (64 KiB for 1 TiB of frames).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "io/sealed_temp_file.hpp"
#include "kdump/format.hpp"
#include "reader/dump_file.hpp"

namespace xendump::kdump {

class BitmapOnDisk {
public:
    static constexpr uint64_t kBlockBytes = 4096;
    static constexpr uint64_t kBlockBits = kBlockBytes * 8;

    BitmapOnDisk() = default;
    // `bytes` bytes at `offset` (inside the file: checked by the caller);
    // `frames` (<= 8 * bytes) of them count. One pass counts the set bits;
    // a bit set at or past `frames` is reported through first_past_frames().
    BitmapOnDisk(std::shared_ptr<const reader::DumpFile> file, uint64_t offset, uint64_t bytes, uint64_t frames,
                 std::string structure);
    // The same over a sealed temporary file (a bitmap the writer made: no
    // plaintext on disk, io/sealed_temp_file.hpp), its bytes from offset 0.
    BitmapOnDisk(std::shared_ptr<const io::SealedTempFile> file, uint64_t bytes, uint64_t frames, std::string structure);

    uint64_t offset() const { return offset_; }
    uint64_t bytes() const { return bytes_; }
    uint64_t frames() const { return frames_; }
    uint64_t count() const { return count_; }  // set bits below frames()
    // The first bit set at or past frames() (~0: none).
    uint64_t first_past_frames() const { return past_; }

    bool test(uint64_t frame) const;
    // Set bits before `frame` (frame <= frames()).
    uint64_t rank(uint64_t frame) const;
    // The frame of set bit `k` (k < count()).
    uint64_t select(uint64_t k) const;
    // Bytes [first, first + out.size()) of the bitmap.
    void read(uint64_t first, std::span<std::byte> out) const;

    // f(frame) for every set bit below frames(), in order, a block at a
    // time; f returns false to stop.
    template <class F>
    void scan(F f) const {
        std::vector<std::byte> block(kBlockBytes);
        for (uint64_t b = 0; b * kBlockBits < frames_; ++b) {
            if (block_count(b) == 0) continue;
            const uint64_t n = std::min(kBlockBytes, bytes_ - b * kBlockBytes);
            read(b * kBlockBytes, std::span(block).first(n));
            for (uint64_t i = 0; i < n; ++i) {
                unsigned bits = std::to_integer<unsigned>(block[i]);
                while (bits) {
                    const uint64_t frame = (b * kBlockBytes + i) * 8 + static_cast<unsigned>(std::countr_zero(bits));
                    bits &= bits - 1;
                    if (frame >= frames_) return;
                    if (!f(frame)) return;
                }
            }
        }
    }

private:
    uint64_t block_count(uint64_t b) const { return before_[b + 1] - before_[b]; }
    // Block b's bytes through the cache (holds the lock while `use` runs).
    template <class Use>
    auto with_block(uint64_t b, Use use) const;

    struct Cache {
        std::mutex mutex;
        std::array<std::pair<uint64_t, std::vector<std::byte>>, 8> blocks;
    };

    void count_blocks();  // before_, count_, past_
    std::shared_ptr<const reader::DumpFile> file_;
    std::shared_ptr<const io::SealedTempFile> sealed_;  // instead of file_
    std::string path_;                                  // the file, in errors
    uint64_t offset_ = 0, bytes_ = 0, frames_ = 0, count_ = 0, past_ = ~uint64_t{0};
    std::string structure_;
    std::vector<uint64_t> before_;  // set bits (below frames_) before block b; one more at the end
    std::unique_ptr<Cache> cache_ = std::make_unique<Cache>();
};

}  // namespace xendump::kdump
