// A flattened file (io/flattened.hpp) read in place as the file it
// carries: one pass over the record heads at open (the data is not read)
// makes a map of the carried file, stretch by stretch, to where the bytes
// lie in the stored file; reads then go through the map. Records that
// overlap are resolved as makedumpfile -R resolves them (the later one
// wins); what no record covers reads as zeros.
//
// Memory: one entry (about 80 bytes) per stretch, not per record: records
// that follow one another in the stream, of one size and for consecutive
// bytes, make one strided stretch. Our writer's records are up to 4 MiB
// each (a stretch or two per 4 MiB of stream: 16 TiB read in place);
// makedumpfile 1.7.2's -F interleaves page data and descriptor records of
// varying sizes, about 64 KiB of data each (a stretch each: some 32 GiB of
// stream). A file whose map would take more than kMaxStretches entries (80
// MiB) is refused, saying to rearrange it (xen-dump-convert) and read the
// result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

namespace xendump::reader {

class FlattenedImage {
public:
    static constexpr size_t kMaxStretches = size_t{1} << 20;

    // Exactly out.size() bytes of the stored file at `offset` (the caller
    // checks the range against its size; throws Error on a failed read).
    using ReadAt = std::function<void(uint64_t offset, std::span<std::byte> out)>;

    // Walks the records of the stored file (`stored_size` bytes), named
    // `name` in errors: Error naming the file and the offset of the header
    // or record that is wrong (io::flat's checks, and a record's data
    // running past the end of the file).
    FlattenedImage(const ReadAt& read, uint64_t stored_size, std::string name);

    uint64_t size() const noexcept { return size_; }  // of the carried file
    uint64_t records() const noexcept { return records_; }
    size_t stretches() const noexcept { return map_.size(); }

    // Reads [offset, offset + out.size()) of the carried file (inside size()).
    void read(uint64_t offset, std::span<std::byte> out, const ReadAt& read) const;

private:
    // Bytes [start, end) of the carried file (the map's key is start): byte
    // `start` is byte `phase` of a record whose data lies at `data` in the
    // stored file; the records of a stretch follow one another in the
    // stream, each `unit` bytes (the last may be shorter), so byte k of the
    // stretch, counted from that record's first (k = x - start + phase),
    // lies at data + k / unit * (unit + 16) + k % unit.
    struct Stretch {
        uint64_t end;
        uint64_t data;
        uint64_t unit;
        uint64_t phase;
    };
    static uint64_t stored_at(uint64_t start, const Stretch& s, uint64_t x) noexcept;
    static Stretch from(uint64_t start, const Stretch& s, uint64_t x) noexcept;  // the part of s from x on
    void place(uint64_t offset, uint64_t size, uint64_t data);

    std::string name_;
    std::map<uint64_t, Stretch> map_;
    uint64_t size_ = 0;
    uint64_t records_ = 0;
};

}  // namespace xendump::reader
