#include "kdump/bitmap_on_disk.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "xendump/error.hpp"

namespace xendump::kdump {

namespace {
// Set bits of bytes [0, n) of `p`, counting only bits below `limit` (a bit count).
uint64_t popcount_bits(const std::byte* p, uint64_t limit) {
    uint64_t c = 0, i = 0;
    for (; (i + 8) * 8 <= limit; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        c += static_cast<uint64_t>(std::popcount(w));
    }
    for (; i * 8 < limit; ++i) {
        unsigned v = std::to_integer<unsigned>(p[i]);
        if (limit - i * 8 < 8) v &= (1u << (limit - i * 8)) - 1;
        c += static_cast<uint64_t>(std::popcount(v));
    }
    return c;
}
}  // namespace

BitmapOnDisk::BitmapOnDisk(std::shared_ptr<const reader::DumpFile> file, uint64_t offset, uint64_t bytes,
                           uint64_t frames, std::string structure)
    : file_(std::move(file)), path_(file_->path()), offset_(offset), bytes_(bytes), frames_(frames),
      structure_(std::move(structure)) {
    count_blocks();
}

BitmapOnDisk::BitmapOnDisk(std::shared_ptr<const io::SealedTempFile> file, uint64_t bytes, uint64_t frames,
                           std::string structure)
    : sealed_(std::move(file)), path_("temporary file in " + sealed_->dir()), bytes_(bytes), frames_(frames),
      structure_(std::move(structure)) {
    count_blocks();
}

void BitmapOnDisk::count_blocks() {
    const uint64_t blocks = (bytes_ + kBlockBytes - 1) / kBlockBytes;
    before_.reserve(blocks + 1);
    before_.push_back(0);
    std::vector<std::byte> block(kBlockBytes);
    for (uint64_t b = 0; b < blocks; ++b) {
        const uint64_t n = std::min(kBlockBytes, bytes_ - b * kBlockBytes);
        read(b * kBlockBytes, std::span(block).first(n));
        const uint64_t first = b * kBlockBits;
        const uint64_t below = frames_ > first ? std::min(frames_ - first, n * 8) : 0;
        const uint64_t c = popcount_bits(block.data(), below);
        before_.push_back(before_.back() + c);
        if (past_ == ~uint64_t{0} && popcount_bits(block.data(), n * 8) != c)
            for (uint64_t bit = below; bit < n * 8; ++bit)
                if (test_bit(block.data(), bit)) {
                    past_ = first + bit;
                    break;
                }
    }
    count_ = before_.back();
}

void BitmapOnDisk::read(uint64_t first, std::span<std::byte> out) const {
    if (first > bytes_ || bytes_ - first < out.size())
        throw Error(structure_ + ": bytes " + std::to_string(first) + "+" + std::to_string(out.size()) +
                        " are past the bitmap (" + std::to_string(bytes_) + " bytes)",
                    path_, offset_ + first);
    if (sealed_)
        sealed_->read(offset_ + first, out.data(), out.size());
    else
        file_->read_exact(offset_ + first, out, structure_);
}

template <class Use>
auto BitmapOnDisk::with_block(uint64_t b, Use use) const {
    std::lock_guard lock(cache_->mutex);
    auto& [first, bytes] = cache_->blocks[b % cache_->blocks.size()];
    if (bytes.empty() || first != b) {
        bytes.resize(static_cast<size_t>(std::min(kBlockBytes, bytes_ - b * kBlockBytes)));
        first = ~uint64_t{0};
        read(b * kBlockBytes, bytes);
        first = b;
    }
    return use(std::span<const std::byte>(bytes));
}

bool BitmapOnDisk::test(uint64_t frame) const {
    if (frame >= frames_) return false;
    return with_block(frame / kBlockBits, [&](std::span<const std::byte> b) {
        return kdump::test_bit(b.data(), frame % kBlockBits);
    });
}

uint64_t BitmapOnDisk::rank(uint64_t frame) const {
    frame = std::min(frame, frames_);
    const uint64_t b = frame / kBlockBits;
    if (b + 1 >= before_.size()) return count_;
    return before_[b] +
           with_block(b, [&](std::span<const std::byte> bytes) { return popcount_bits(bytes.data(), frame % kBlockBits); });
}

uint64_t BitmapOnDisk::select(uint64_t k) const {
    if (k >= count_)
        throw Error(structure_ + ": set bit " + std::to_string(k) + " of " + std::to_string(count_) + " does not exist",
                    path_, offset_);
    // The block whose count passes k.
    const auto it = std::upper_bound(before_.begin(), before_.end(), k);
    const uint64_t b = static_cast<uint64_t>(it - before_.begin()) - 1;
    uint64_t left = k - before_[b];
    return with_block(b, [&](std::span<const std::byte> bytes) {
        for (uint64_t i = 0; i < bytes.size(); ++i) {
            unsigned bits = std::to_integer<unsigned>(bytes[i]);
            const unsigned c = static_cast<unsigned>(std::popcount(bits));
            if (left >= c) {
                left -= c;
                continue;
            }
            while (left--) bits &= bits - 1;
            return b * kBlockBits + i * 8 + static_cast<unsigned>(std::countr_zero(bits));
        }
        return ~uint64_t{0};  // not reached: the block holds k
    });
}

}  // namespace xendump::kdump
