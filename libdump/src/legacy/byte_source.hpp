// Random access to the bytes of an input file, bounds-checked. The legacy
// parser reads through this so the same code runs over a file descriptor (the
// converter) and over memory (the fuzz target).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <ctime>

#include "xendump/fd.hpp"
#include "xendump/reader.hpp"
#include "pipeline/zero_copy_source.hpp"

namespace xendump::reader {
class DumpFile;
}

namespace xendump::legacy {

class ByteSource {
public:
    virtual ~ByteSource() = default;
    virtual uint64_t size() const = 0;
    // Name used in error messages (the file path).
    virtual const std::string& name() const = 0;
    // Reads exactly out.size() bytes at `offset`; throws Error naming `what`
    // and the offset when the range is past the end of the input.
    void read(uint64_t offset, std::span<std::byte> out, const char* what) const;
    // Where these bytes sit in a real file, for copy_file_range.
    virtual std::optional<FileRange> file_range(uint64_t /*offset*/) const { return std::nullopt; }
    // The first stretch of data at or after `offset`, [start, end): what
    // lies before `start` is a hole (zeros, not worth reading); start ==
    // size() when only holes follow. Default: everything is data.
    struct Extent {
        uint64_t start, end;
    };
    virtual Extent data_from(uint64_t offset) const { return {offset, size()}; }

protected:
    virtual void read_unchecked(uint64_t offset, std::span<std::byte> out) const = 0;
};

// Over a regular file, opened read-only (the source is never modified).
// Anything else (a FIFO, a device, a socket) is refused without blocking.
// An age-encrypted file (xen-dump-core(5) "Encrypted dumps") reads as its
// plaintext, decrypted with `open`'s identities a 64 KiB chunk at a time as
// DumpReader reads one (reader/dump_file.hpp; an Error says it is
// encrypted when there is none): size() is the plaintext's, there are no
// holes and no file ranges. `path` s3://BUCKET/KEY reads an object of the
// store (never written to) through the readers' byte layer as DumpReader
// reads one (reader::DumpFile over store/object_reader.hpp: ranged GETs of
// cached 64 KiB blocks, the client's settings from the environment), an
// encrypted object as its plaintext; no holes, no file ranges, the mtime
// the object's Last-Modified (whole seconds). `open` is used in the
// constructor only.
class FileByteSource : public ByteSource {
public:
    explicit FileByteSource(std::string path, const OpenOptions& open = {});
    ~FileByteSource() override;
    uint64_t size() const override { return size_; }
    // Modification time when it was opened (the source's identity).
    const timespec& mtime() const { return mtime_; }
    const std::string& name() const override { return path_; }
    bool encrypted() const noexcept;
    std::optional<FileRange> file_range(uint64_t offset) const override {
        if (through_) return std::nullopt;
        return FileRange{fd_.get(), offset};
    }
    // SEEK_DATA and SEEK_HOLE (everything is data where they fail).
    Extent data_from(uint64_t offset) const override;

protected:
    void read_unchecked(uint64_t offset, std::span<std::byte> out) const override;

private:
    std::string path_;
    UniqueFd fd_;
    uint64_t size_ = 0;
    timespec mtime_{};
    // The bytes when they are not the file's own: an encrypted file's
    // plaintext, an object of the store.
    std::unique_ptr<reader::DumpFile> through_;
};

// Over bytes in memory (fuzzing, unit tests). Does not own them.
class MemoryByteSource : public ByteSource {
public:
    MemoryByteSource(std::span<const std::byte> bytes, std::string name)
        : bytes_(bytes), name_(std::move(name)) {}
    uint64_t size() const override { return bytes_.size(); }
    const std::string& name() const override { return name_; }

protected:
    void read_unchecked(uint64_t offset, std::span<std::byte> out) const override;

private:
    std::span<const std::byte> bytes_;
    std::string name_;
};

}  // namespace xendump::legacy
