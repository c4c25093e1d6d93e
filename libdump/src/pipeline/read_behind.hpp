// The sink stage's read-back behind the writer (pages_read_back.hpp): the Sink hands over
// each range of the file the disk has acknowledged, just before dropping it
// from the page cache; the part inside .xen_pages is read back from the file
// (from the page cache, no disk read) and hashed in digest chunks, whose
// digests are folded into one (DigestFold): nothing is held per chunk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stream_hash.hpp"
#include "xendump/pages_read_back.hpp"

namespace xendump::pipeline {

class ReadBehind {
public:
    ReadBehind(int fd, uint64_t pages_offset, uint64_t pages_size, uint64_t chunk_bytes, std::string name);

    // [offset, offset + size) of the file; ranges follow each other.
    void take(uint64_t offset, uint64_t size);
    // The chunks hashed so far (every one complete), and their fold.
    PagesReadBack result() const;

private:
    void hash(const std::byte* p, uint64_t n);

    int fd_;
    std::string name_;
    uint64_t next_ = 0;  // the next file offset expected
    uint64_t pages_offset_, pages_size_, chunk_bytes_;
    ChunkedHash hash_;
    DigestFold fold_;
    std::vector<std::byte> buf_;
};

}  // namespace xendump::pipeline
