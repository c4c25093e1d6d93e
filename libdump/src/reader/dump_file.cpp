#include "reader/dump_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "reader/checked.hpp"
#include "xendump/error.hpp"

namespace xendump::reader {

DumpFile::DumpFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_errno("cannot open", path_);
    struct stat st{};
    if (fstat(fd_, &st) != 0) {
        int e = errno;
        ::close(fd_);
        throw Error("cannot stat", path_, std::nullopt, e);
    }
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
        ::close(fd_);
        throw Error("not a regular file", path_);
    }
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
