#include "pipeline/read_behind.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "xendump/error.hpp"
#include "util/util.hpp"

namespace xendump::pipeline {

namespace {
constexpr size_t kReadSize = 256u << 10;  // still in the CPU cache when hashed
}

ReadBehind::ReadBehind(int fd, uint64_t pages_offset, uint64_t pages_size, uint64_t chunk_bytes, std::string name)
    : fd_(fd),
      name_(std::move(name)),
      pages_offset_(pages_offset),
      pages_size_(pages_size),
      chunk_bytes_(chunk_bytes),
      hash_(chunk_bytes),
      buf_(kReadSize) {
    if (chunk_bytes == 0) throw Error("internal error: read-back chunk size 0", name_);
}

PagesReadBack ReadBehind::result() const {
    PagesReadBack r;
    r.pages_offset = pages_offset_;
    r.pages_size = pages_size_;
    r.chunk_bytes = chunk_bytes_;
    r.chunks = fold_.count();
    const XXH128_canonical_t d = fold_.digest();
    std::memcpy(r.digest_of_chunks.data(), &d, sizeof d);
    return r;
}

void ReadBehind::hash(const std::byte* p, uint64_t n) {
    hash_.update(p, n, [this](const XXH128_canonical_t& c) { fold_.add(c); });
}

void ReadBehind::take(uint64_t offset, uint64_t size) {
    if (offset != next_) throw Error("internal error: read-back range out of order", name_, offset);
    next_ = offset + size;
    uint64_t pos = std::max(offset, pages_offset_);
    const uint64_t end = std::min(next_, pages_offset_ + pages_size_);
    while (pos < end) {
        const size_t want = static_cast<size_t>(std::min<uint64_t>(buf_.size(), end - pos));
        const ssize_t n = util::retry_eintr([&] { return ::pread(fd_, buf_.data(), want, static_cast<off_t>(pos)); });
        if (n < 0) throw_errno("cannot read back the written pages", name_, pos);
        if (n == 0) {
            // Past the end of the file so far: zero pages left as a hole
            // that no write has reached yet. The writer never goes back
            // into .xen_pages, and the file is extended with zeros at the
            // end (Sink::finish), so these bytes are zeros for good.
            std::fill(buf_.begin(), buf_.end(), std::byte{0});
            while (pos < end) {
                const uint64_t z = std::min<uint64_t>(buf_.size(), end - pos);
                hash(buf_.data(), z);
                pos += z;
            }
            return;
        }
        hash(buf_.data(), static_cast<uint64_t>(n));
        pos += static_cast<uint64_t>(n);
    }
}

}  // namespace xendump::pipeline
