// Bytes read at any offset, wherever they are kept: a regular file (pread)
// or an object in S3-compatible storage (ranged GETs, store/object_reader.hpp).
// The readers' byte layer (reader/dump_file.hpp) and the age decryptor above
// it read through this, so that a dump in the store reads as a local one
// (issue 34 item 4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace xendump::io {

class RandomAccess {
public:
    virtual ~RandomAccess() = default;
    virtual uint64_t size() const = 0;
    // What errors name: the file's path, the object's s3://BUCKET/KEY.
    virtual const std::string& name() const = 0;
    // Reads up to out.size() bytes at `offset` (fewer only where the bytes
    // end); throws Error naming name() and the offset when the read fails.
    // Safe to call from several threads at once.
    virtual size_t read_at(uint64_t offset, std::span<std::byte> out) const = 0;
};

// A regular file open at `fd` (not owned), of `size` bytes.
class FdRandomAccess final : public RandomAccess {
public:
    FdRandomAccess(int fd, uint64_t size, std::string name) : fd_(fd), size_(size), name_(std::move(name)) {}
    uint64_t size() const override { return size_; }
    const std::string& name() const override { return name_; }
    size_t read_at(uint64_t offset, std::span<std::byte> out) const override;

private:
    int fd_;
    uint64_t size_;
    std::string name_;
};

}  // namespace xendump::io
