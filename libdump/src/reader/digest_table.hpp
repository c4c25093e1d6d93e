// NT_XEN_DIGEST's descriptor where it lies, in the dump file (xen-dump-core(5)
// "Trailer notes"): a DigestDescHead, then one XXH3-128 digest (16 bytes) per
// chunk of chunk_pages pages, then the digests of the notes and of the
// table. 16 bytes a 256-page chunk is 16 MiB for a 1 TiB guest: the reader
// leaves the descriptor unread at open and verify reads the stored digests
// a window at a time (64 KiB), in the order it hashes the chunks.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "reader/dump_file.hpp"
#include "reader/notes.hpp"
#include "xendump/format.hpp"
#include "xendump/reader.hpp"

namespace xendump::reader {

class DigestTable {
public:
    using Canonical = XXH128_canonical_t;
    static constexpr uint64_t kWindow = 4096;  // digests read at a time (64 KiB)

    // `note` was parsed from `file` (its descriptor read or not); reads the
    // head. `window`: digests read at a time (> 0).
    DigestTable(const DumpFile& file, const Note& note, uint64_t window = kWindow);

    const format::DigestDescHead& head() const { return head_; }
    // The "digest-format" finding when the descriptor is not XXH3-128 digests
    // of `pages` pages' chunks and the two more (notes, table); else nullopt.
    std::optional<Finding> format_problem(uint64_t pages) const;
    // Page chunks of `pages` pages (0 when chunk_pages is 0).
    uint64_t chunks(uint64_t pages) const;

    // Stored digest k (k < chunks + 2: format_problem() said none), read
    // through a window; windows move forward or back as asked.
    Canonical at(uint64_t k);
    // The file offset of stored digest k (for messages).
    uint64_t offset_of(uint64_t k) const { return note_.desc_offset + sizeof head_ + 16 * k; }

private:
    const DumpFile& file_;
    const Note& note_;
    uint64_t window_size_;
    format::DigestDescHead head_{};
    uint64_t first_ = 0;
    std::vector<Canonical> window_;
};

}  // namespace xendump::reader
