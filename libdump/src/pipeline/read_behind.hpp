// The sink stage's read-back behind the writer (pages_read_back.hpp): the Sink hands over
// each range of the file the disk has acknowledged, just before dropping it
// from the page cache; the part inside .xen_pages is read back from the file
// (from the page cache, no disk read) and hashed in digest chunks, whose
// digests are folded into one (DigestFold): nothing is held per chunk.
//
// A live dump's writer, which digests every chunk again from the file after
// its final round (write_dump.cpp), reads the file back the same way and
// folds its chunks with ReadBackFold.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stream_hash.hpp"
#include "xendump/pages_read_back.hpp"

namespace xendump::pipeline {

// Reads `size` bytes of the file at `offset` into `out` as they are now;
// bytes past the end of the file so far are zeros: pages of zeros left as a
// hole that no write has reached yet (the file is extended with zeros at its
// end, Sink::finish), zeros for good.
void read_back(int fd, std::byte* out, uint64_t size, uint64_t offset, const std::string& name);

// Chunk digests of .xen_pages, read back from the file, folded in order
// into a PagesReadBack (chunks 0 .. count-1).
class ReadBackFold {
public:
    ReadBackFold(uint64_t pages_offset, uint64_t pages_size, uint64_t chunk_bytes)
        : pages_offset_(pages_offset), pages_size_(pages_size), chunk_bytes_(chunk_bytes) {}
    // The next chunk's digest (canonical XXH3-128 of its bytes as read back).
    void add(const XXH128_canonical_t& digest) { fold_.add(digest); }
    PagesReadBack result() const;

private:
    uint64_t pages_offset_, pages_size_, chunk_bytes_;
    DigestFold fold_;
};

class ReadBehind {
public:
    ReadBehind(int fd, uint64_t pages_offset, uint64_t pages_size, uint64_t chunk_bytes, std::string name);

    // [offset, offset + size) of the file; ranges follow each other.
    void take(uint64_t offset, uint64_t size);
    // The chunks hashed so far (every one complete), and their fold.
    PagesReadBack result() const { return fold_.result(); }

private:
    int fd_;
    std::string name_;
    uint64_t next_ = 0;  // the next file offset expected
    uint64_t pages_offset_, pages_size_;
    ChunkedHash hash_;
    ReadBackFold fold_;
    std::vector<std::byte> buf_;
};

}  // namespace xendump::pipeline
