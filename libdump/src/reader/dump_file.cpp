#include "reader/dump_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "reader/checked.hpp"
#include "xendump/error.hpp"

namespace xendump::reader {

namespace {

const char* file_kind(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISDIR(mode)) return "a directory";
    return "an unsupported file type";
}

}  // namespace

// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
// (forever); the file is refused by its type before anything is read.
DumpFile::DumpFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd_ < 0) throw_errno("cannot open", path_);
    struct stat st{};
    if (fstat(fd_, &st) != 0) {
        int e = errno;
        ::close(fd_);
        throw Error("cannot stat", path_, std::nullopt, e);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd_);
        throw Error(std::string("not a regular file (") + file_kind(st.st_mode) + "): a dump is read from a file",
                    path_);
    }
    // Regular files never block; clear the flag all the same for the reads.
    if (int fl = ::fcntl(fd_, F_GETFL); fl >= 0) ::fcntl(fd_, F_SETFL, fl & ~O_NONBLOCK);
    size_ = static_cast<uint64_t>(st.st_size);
}

DumpFile::~DumpFile() {
    if (fd_ >= 0) ::close(fd_);
}

void DumpFile::read_exact(uint64_t offset, std::span<std::byte> out, const std::string& structure) const {
    if (!range_inside(offset, out.size(), size_))
        throw Error(structure + ": " + past_end("offset", offset, "size", out.size(), size_), path_, offset);
    size_t done = 0;
    while (done < out.size()) {
        ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_errno(structure + ": read failed", path_, offset + done);
        }
        if (n == 0)
            throw Error(structure + ": file shrank while reading (end at " + hex(offset + done) + ")", path_,
                        offset + done);
        done += static_cast<size_t>(n);
    }
}

std::vector<std::byte> DumpFile::read_bytes(uint64_t offset, uint64_t size, const std::string& structure) const {
    if (!range_inside(offset, size, size_))
        throw Error(structure + ": " + past_end("offset", offset, "size", size, size_), path_, offset);
    std::vector<std::byte> out(static_cast<size_t>(size));
    read_exact(offset, out, structure);
    return out;
}

}  // namespace xendump::reader
