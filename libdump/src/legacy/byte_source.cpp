#include "legacy/byte_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "legacy/hex.hpp"
#include "reader/dump_file.hpp"
#include "store/object_reader.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {

void ByteSource::read(uint64_t offset, std::span<std::byte> out, const char* what) const {
    uint64_t total = size();
    if (offset > total || total - offset < out.size())
        throw Error(std::string(what) + ": " + std::to_string(out.size()) + " bytes at " + hex(offset) +
                        " are past the end of the file (size " + hex(total) + ")",
                    name(), offset);
    read_unchecked(offset, out);
}

FileByteSource::FileByteSource(std::string path, const OpenOptions& open) : path_(std::move(path)) {
    if (s3::is_url(path_)) {
        through_ = std::make_unique<reader::DumpFile>(path_, reader::DumpFile::identities_of(open));
        size_ = through_->size();
        mtime_.tv_sec = static_cast<time_t>(through_->object()->last_modified());
        return;
    }
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
    // below); on a regular file the flag changes nothing.
    fd_.reset(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd_) throw_errno("cannot open", path_);
    struct stat st {};
    if (fstat(fd_.get(), &st) != 0) throw_errno("cannot stat", path_);
    if (!S_ISREG(st.st_mode)) throw Error(std::string("not a regular file: it is ") + util::file_kind(st.st_mode), path_);
    size_ = static_cast<uint64_t>(st.st_size);
    mtime_ = st.st_mtim;
    if (reader::starts_as_age(fd_.get(), size_)) {
        through_ = std::make_unique<reader::DumpFile>(path_, reader::DumpFile::identities_of(open));
        size_ = through_->size();
    }
}

FileByteSource::~FileByteSource() = default;

bool FileByteSource::encrypted() const noexcept { return through_ && through_->encrypted(); }

ByteSource::Extent FileByteSource::data_from(uint64_t offset) const {
    if (offset >= size_) return {size_, size_};
    if (through_) return {offset, size_};  // an age file or an object has no holes
    const off_t data = ::lseek(fd_.get(), static_cast<off_t>(offset), SEEK_DATA);
    if (data < 0) return errno == ENXIO ? Extent{size_, size_} : Extent{offset, size_};
    const off_t hole = ::lseek(fd_.get(), data, SEEK_HOLE);
    const uint64_t start = std::min<uint64_t>(static_cast<uint64_t>(data), size_);
    return {start, hole < 0 ? size_ : std::clamp<uint64_t>(static_cast<uint64_t>(hole), start, size_)};
}

void FileByteSource::read_unchecked(uint64_t offset, std::span<std::byte> out) const {
    if (through_) return through_->read_exact(offset, out, "input");  // authenticated chunk by chunk, or GETs
    const long n = util::pread_full(fd_.get(), out.data(), out.size(), offset);
    if (n < 0) throw_errno("read failed", path_, offset);
    if (static_cast<size_t>(n) < out.size())
        throw Error("file shrank while being read", path_, offset + static_cast<uint64_t>(n));
}

void MemoryByteSource::read_unchecked(uint64_t offset, std::span<std::byte> out) const {
    if (out.empty()) return;  // memcpy's pointers must not be null, even for 0 bytes (found by fuzz_legacy)
    std::memcpy(out.data(), bytes_.data() + offset, out.size());
}

}  // namespace xendump::legacy
