#include "reader/dump_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "reader/checked.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::reader {

// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
// (forever); the file is refused by its type before anything is read.
DumpFile::DumpFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd_ < 0) throw_errno("cannot open", path_);
    take_size();
    // Regular files never block; clear the flag all the same for the reads.
    if (int fl = ::fcntl(fd_, F_GETFL); fl >= 0) ::fcntl(fd_, F_SETFL, fl & ~O_NONBLOCK);
}

DumpFile::DumpFile(UniqueFd fd, std::string name) : path_(std::move(name)), fd_(fd.release()) { take_size(); }

void DumpFile::take_size() {
    struct stat st{};
    if (fstat(fd_, &st) != 0) {
        int e = errno;
        ::close(fd_);
        throw Error("cannot stat", path_, std::nullopt, e);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd_);
        throw Error(std::string("not a regular file (") + util::file_kind(st.st_mode) + "): a dump is read from a file",
                    path_);
    }
    size_ = static_cast<uint64_t>(st.st_size);
}

DumpFile::~DumpFile() {
    if (fd_ >= 0) ::close(fd_);
}

void DumpFile::read_exact(uint64_t offset, std::span<std::byte> out, const std::string& structure) const {
    if (!range_inside(offset, out.size(), size_))
        throw Error(structure + ": " + past_end("offset", offset, "size", out.size(), size_), path_, offset);
    const long n = util::pread_full(fd_, out.data(), out.size(), offset);
    if (n < 0) throw_errno(structure + ": read failed", path_, offset);
    const uint64_t end = offset + static_cast<uint64_t>(n);
    if (static_cast<size_t>(n) < out.size())
        throw Error(structure + ": file shrank while reading (end at " + hex(end) + ")", path_, end);
}

std::vector<std::byte> DumpFile::read_bytes(uint64_t offset, uint64_t size, const std::string& structure) const {
    if (!range_inside(offset, size, size_))
        throw Error(structure + ": " + past_end("offset", offset, "size", size, size_), path_, offset);
    std::vector<std::byte> out(static_cast<size_t>(size));
    read_exact(offset, out, structure);
    return out;
}

}  // namespace xendump::reader
