// A read-only MAP_SHARED view of a whole file: pages written by another
// process (the balloon command rewrites p2m entries) are seen at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace xendump::sim {

class MappedFile {
public:
    MappedFile() = default;
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::byte* data() const { return data_; }
    uint64_t size() const { return size_; }
    // Copies [offset, offset+len) to out, zero-filling what lies past the end.
    void copy_out(uint64_t offset, size_t len, std::byte* out) const;

private:
    std::byte* data_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace xendump::sim
