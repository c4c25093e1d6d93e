#include "pipeline/read_behind.hpp"

#include <algorithm>
#include <cstring>

#include "xendump/error.hpp"
#include "util/util.hpp"

namespace xendump::pipeline {

namespace {
constexpr size_t kReadSize = 256u << 10;  // still in the CPU cache when hashed
}

void read_back(int fd, std::byte* out, uint64_t size, uint64_t offset, const std::string& name) {
    const long got = util::pread_full(fd, out, static_cast<size_t>(size), offset);
    if (got < 0) throw_errno("cannot read back the written pages", name, offset);
    std::fill(out + got, out + size, std::byte{0});
}

PagesReadBack ReadBackFold::result() const {
    PagesReadBack r;
    r.pages_offset = pages_offset_;
    r.pages_size = pages_size_;
    r.chunk_bytes = chunk_bytes_;
    r.chunks = fold_.count();
    const XXH128_canonical_t d = fold_.digest();
    std::memcpy(r.digest_of_chunks.data(), &d, sizeof d);
    return r;
}

ReadBehind::ReadBehind(int fd, uint64_t pages_offset, uint64_t pages_size, uint64_t chunk_bytes, std::string name)
    : fd_(fd),
      name_(std::move(name)),
      pages_offset_(pages_offset),
      pages_size_(pages_size),
      hash_(chunk_bytes),
      fold_(pages_offset, pages_size, chunk_bytes),
      buf_(kReadSize) {
    if (chunk_bytes == 0) throw Error("internal error: read-back chunk size 0", name_);
}

void ReadBehind::take(uint64_t offset, uint64_t size) {
    if (offset != next_) throw Error("internal error: read-back range out of order", name_, offset);
    next_ = offset + size;
    uint64_t pos = std::max(offset, pages_offset_);
    const uint64_t end = std::min(next_, pages_offset_ + pages_size_);
    while (pos < end) {
        const uint64_t want = std::min<uint64_t>(buf_.size(), end - pos);
        read_back(fd_, buf_.data(), want, pos, name_);
        hash_.update(buf_.data(), want, [this](const XXH128_canonical_t& c) { fold_.add(c); });
        pos += want;
    }
}

}  // namespace xendump::pipeline
