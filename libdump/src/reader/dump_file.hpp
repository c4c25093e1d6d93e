// The open dump file: an fd, its size at open, and bounds-checked reads that
// say which structure was being read when they fail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "xendump/fd.hpp"

namespace xendump::reader {

class DumpFile {
public:
    explicit DumpFile(std::string path);
    // A regular file already open for reading (its fd now owned), named
    // `name` in errors: a file the library wrote itself (a temporary one).
    DumpFile(UniqueFd fd, std::string name);
    ~DumpFile();
    DumpFile(const DumpFile&) = delete;
    DumpFile& operator=(const DumpFile&) = delete;

    int fd() const noexcept { return fd_; }
    uint64_t size() const noexcept { return size_; }
    const std::string& path() const noexcept { return path_; }

    // Reads exactly out.size() bytes at `offset`. Throws Error (naming
    // `structure`) when the range leaves the file or the read fails.
    void read_exact(uint64_t offset, std::span<std::byte> out, const std::string& structure) const;
    std::vector<std::byte> read_bytes(uint64_t offset, uint64_t size, const std::string& structure) const;

private:
    void take_size();  // closes fd_ and throws unless it is a regular file

    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

}  // namespace xendump::reader
