#include "sim/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>
#include <utility>

#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::sim {

MappedFile::MappedFile(const std::filesystem::path& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw_errno("cannot open", path.string());
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat", path.string());
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) throw_errno("cannot map", path.string());
    data_ = static_cast<std::byte*>(p);
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(data_, size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        if (data_) ::munmap(data_, size_);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
    }
    return *this;
}

void MappedFile::copy_out(uint64_t offset, size_t len, std::byte* out) const {
    size_t have = 0;
    if (offset < size_) have = static_cast<size_t>(std::min<uint64_t>(len, size_ - offset));
    if (have) std::memcpy(out, data_ + offset, have);
    if (have < len) std::memset(out + have, 0, len - have);
}

}  // namespace xendump::sim
