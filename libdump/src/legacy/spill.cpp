#include "legacy/spill.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "io/sealed_temp_file.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {

TempFile::TempFile() : file_(std::make_unique<io::SealedTempFile>("the conversion's tables")) {}
TempFile::~TempFile() = default;
TempFile::TempFile(TempFile&&) noexcept = default;
TempFile& TempFile::operator=(TempFile&&) noexcept = default;

void TempFile::write(uint64_t offset, const void* data, size_t size) const { file_->write(offset, data, size); }

void TempFile::read(uint64_t offset, void* out, size_t size) const {
    if (offset > file_->size() || file_->size() - offset < size)
        throw Error("cannot read back a temporary file: past what was written", file_->dir(), offset);
    file_->read(offset, out, size);
}

void* map_anonymous(size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error("cannot map " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
    return p;
}

void unmap_anonymous(void* p, size_t bytes) { ::munmap(p, bytes); }

SparseBitmap::SparseBitmap(uint64_t base, uint64_t bits) : base_(base), bits_(bits) {
    const uint64_t bytes = ((bits + 63) / 64) * 8;
    bytes_ = static_cast<size_t>(std::max<uint64_t>(bytes, 8));
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        throw Error("cannot map " + std::to_string(bytes_) + " bytes of address space for a bitmap of " +
                    std::to_string(bits) + " frames: " + std::strerror(errno));
    words_ = static_cast<uint64_t*>(p);
}

SparseBitmap::~SparseBitmap() {
    if (words_) ::munmap(words_, bytes_);
}

SparseBitmap& SparseBitmap::operator=(SparseBitmap&& o) noexcept {
    if (this != &o) {
        if (words_) ::munmap(words_, bytes_);
        words_ = std::exchange(o.words_, nullptr);
        base_ = std::exchange(o.base_, 0);
        bits_ = std::exchange(o.bits_, 0);
        bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
}

void SparseBitmap::clear() {
    // Private anonymous pages: MADV_DONTNEED drops them, and they read as zero again.
    if (words_) ::madvise(words_, bytes_, MADV_DONTNEED);
}

}  // namespace xendump::legacy
