// What the writer learnt of a file's page chunks from the file's own bytes
// while it was being written: once a stretch of .xen_pages has been written
// back without error, and just before it is dropped from the page cache,
// the writer reads it back from the file (from the cache) and hashes it in
// 256-page chunks (xen-dump-core(5) "Trailer notes"). It keeps nothing per
// chunk: each chunk's digest (canonical XXH3-128, as stored) is folded, in
// order, into one running XXH3-128 of the digests, and the chunks are
// counted. A check of the finished file (WriteOptions::check_before_publish,
// then VerifyOptions::pages_read_back) folds the stored digests of the same
// chunks the same way: equal, those chunks are proven and not read from the
// disk again; different, every one of them is read and hashed as if there
// had been no read-back, so that a bad chunk is still named. What it proves
// is that the file holds the right bytes at the right offsets as the kernel
// wrote them out; it does not read the device itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace xendump {

struct PagesReadBack {
    uint64_t pages_offset = 0;  // file offset of .xen_pages they were read at
    uint64_t pages_size = 0;    // and its size
    uint64_t chunk_bytes = 0;   // bytes per chunk
    // Chunks 0 .. chunks-1 were read back; the chunks after them were still
    // in the page cache when the file ended.
    uint64_t chunks = 0;
    // XXH3-128 (canonical form) of those chunks' digests (each canonical
    // XXH3-128 of the chunk, 16 bytes) one after the other, in order.
    std::array<std::byte, 16> digest_of_chunks{};
};

}  // namespace xendump
