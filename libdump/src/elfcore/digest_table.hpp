// The chunk digests of NT_XEN_DIGEST (xen-dump-core(5) "Trailer notes"),
// 16 bytes per 256 pages, as a writer's pass makes them, held in memory a
// window at a time (issue 19: 16 MiB per TiB of guest otherwise):
//  - placed (a v1 file on a seekable output, whose trailer offset is planned
//    before the first page): each full window is written at once into its
//    final place in the file (io::Sink::write_ahead); when the stream
//    reaches the table, it passes over what is there and writes the rest;
//  - spilled (a pipe; a compact file, whose note area's offset is known only
//    after the pages): each full window goes to an unlinked temporary file
//    (O_TMPFILE in $TMPDIR, else /var/tmp), sealed under a key of its own
//    (io::SealedTempFile: no digest lies on disk in clear), copied out when the note is
//    written. A table of at most one window never touches the disk.
// Either way the bytes written are the digests in order, as if held whole.
#pragma once

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/sealed_temp_file.hpp"
#include "io/sink.hpp"
#include "xendump/fd.hpp"

namespace xendump::elfcore {

class DigestTable {
public:
    // 4096 digests (64 KiB) a window: 1 Mi pages, 4 GiB of guest.
    static constexpr size_t kWindow = 4096;

    // `name`: the output, for errors. `window`: digests held in memory (a
    // test makes it small to cross windows with a small guest).
    explicit DigestTable(std::string name, size_t window = kWindow);

    // The table's bytes go at `offset` of `out` (seekable), planned ahead.
    void place_in(io::Sink& out, uint64_t offset);

    void add(const XXH128_canonical_t& digest);
    void add(std::span<const XXH128_canonical_t> digests);

    uint64_t size() const noexcept { return flushed_ + buf_.size(); }
    // Digest `index` (added already) replaced: in memory, or in its place
    // in `out` when its window was placed there, in the spill file when it
    // went there (before write_to).
    void replace(uint64_t index, const XXH128_canonical_t& digest, io::Sink& out);
    // Bytes held in memory for the digests: at most one window's.
    size_t resident_bytes() const noexcept { return buf_.capacity() * sizeof(XXH128_canonical_t); }
    bool spilled() const noexcept { return static_cast<bool>(spill_); }

    // Writes every digest added, in order, at out's position (for a placed
    // table: its planned offset, passing over the windows already there).
    void write_to(io::Sink& out);

private:
    void flush();

    std::string name_;
    size_t window_;
    std::vector<XXH128_canonical_t> buf_;  // the digests after the first flushed_
    uint64_t flushed_ = 0;                 // digests written out (in place or to the spill file)
    io::Sink* place_ = nullptr;
    uint64_t offset_ = 0;
    std::unique_ptr<io::SealedTempFile> spill_;  // sealed: digests of pages are not left on disk in clear
};

// Writes NT_XEN_DIGEST (xen-dump-core(5) "Trailer notes") at out's
// position: its "XEN CORE" note header, DigestDescHead, every digest of
// `chunks` (DigestTable::write_to), then the digest of the note segment and
// of the table. Returns the note's size.
uint64_t write_digest_note(io::Sink& out, DigestTable& chunks, const XXH128_canonical_t& notes_digest,
                           const XXH128_canonical_t& table_digest);

}  // namespace xendump::elfcore
