// The digests of a file's page chunks taken from the file's own bytes while
// it was being written: once a stretch of .xen_pages has been written back
// without error, and just before it is dropped from the page cache, the
// writer reads it back from the file (from the cache) and hashes it in
// 256-page chunks (xen-dump-core(5) "Trailer notes"). A check of the finished file
// (WriteOptions::check_before_publish, then VerifyOptions::pages_read_back)
// compares these with the stored digests instead of reading those pages
// from the disk again. What it proves is that the file holds the right
// bytes at the right offsets as the kernel wrote them out; it does not read
// the device itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace xendump {

struct PagesReadBack {
    uint64_t pages_offset = 0;  // file offset of .xen_pages they were read at
    uint64_t pages_size = 0;    // and its size
    uint64_t chunk_bytes = 0;   // bytes per chunk
    // XXH3-128 (canonical form) of chunks 0 .. size()-1, in order; the
    // chunks after them were still in the page cache when the file ended.
    std::vector<std::array<std::byte, 16>> chunks;
};

}  // namespace xendump
