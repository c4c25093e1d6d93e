// NT_XEN_DIGEST (xen-dump-core(5) "Trailer notes"): XXH3-128 of every 256-page chunk of .xen_pages,
// of the note segment and of the table's descriptor, recomputed in one
// sequential pass. Reads are small enough (256 KiB) that the hash finds the
// bytes the kernel just copied still in the CPU cache (hashing from memory
// costs more than reading), and the chunks, being independent, are split
// between up to two threads, each reading and hashing its own half.
#include <fcntl.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "reader/checked.hpp"
#include "reader/digest_table.hpp"
#include "xendump/error.hpp"
#include "reader/reader_impl.hpp"
#include "stream_hash.hpp"
#include "two_halves.hpp"

namespace xendump::reader {

namespace {

constexpr uint64_t kReadSize = 256ull << 10;  // still in the CPU cache when hashed
constexpr uint64_t kDropWindow = 8ull << 20;  // VerifyOptions::drop_behind: as the writer's window
constexpr size_t kMaxReported = 32;         // mismatching chunks listed one by one

using Canonical = XXH128_canonical_t;

// Hashes [offset, offset + size) of the file in chunks of `chunk` bytes,
// calling `on_chunk(k, digest)` per chunk and `on_read(bytes)` per read; with
// `drop_behind`, what was read leaves the page cache every kDropWindow bytes.
template <class OnChunk, class OnRead>
void hash_range(const DumpFile& f, uint64_t offset, uint64_t size, uint64_t chunk, std::vector<std::byte>& buf,
                const std::string& structure, bool drop_behind, OnChunk on_chunk, OnRead on_read) {
    ChunkedHash h(chunk);
    uint64_t pos = 0, k = 0, dropped = 0;
    while (pos < size) {
        if (drop_behind && f.fd() >= 0 && pos - dropped >= kDropWindow) {
            posix_fadvise(f.fd(), static_cast<off_t>(offset + dropped), static_cast<off_t>(pos - dropped),
                          POSIX_FADV_DONTNEED);
            dropped = pos;
        }
        const uint64_t n = std::min<uint64_t>(buf.size(), size - pos);
        f.read_exact(offset + pos, std::span(buf).first(n), structure);
        h.update(buf.data(), n, [&](const Canonical& c) { on_chunk(k++, c); });
        pos += n;
        on_read(n);
    }
    if (h.pending() != 0 || size == 0) on_chunk(k, h.finish());
}

}  // namespace

std::vector<Finding> check_digests(const DumpReader::Impl& d, const VerifyOptions& options) {
    std::vector<Finding> out;
    const uint64_t pages = d.pages_size / format::kPageSize;
    DigestTable table(*d.file, *d.digest);
    if (auto bad = table.format_problem(pages)) {
        out.push_back(std::move(*bad));
        return out;
    }
    const format::DigestDescHead head = table.head();
    const uint64_t chunks = table.chunks(pages);
    const uint64_t total = d.pages_size + d.notes_size + d.table_size;
    uint64_t done = 0;
    auto progress = [&](uint64_t n) {
        done += n;
        if (options.on_progress) options.on_progress(done, total);
    };
    std::vector<std::byte> buf(kReadSize);
    const int fd = d.file->fd();
    // An object in the store has no fd (-1): nothing to advise.
    if (fd >= 0)
        posix_fadvise(fd, static_cast<off_t>(d.pages_offset), static_cast<off_t>(d.pages_size), POSIX_FADV_SEQUENTIAL);

    // The page chunks: split at a chunk boundary between two threads; the
    // second reports no progress of its own, the first reports both. Chunks
    // read back from this file by its writer (same offset and chunk size)
    // are not read again when they prove right (below).
    const uint64_t chunk_bytes = uint64_t{head.chunk_pages} * format::kPageSize;
    // Each chunk is compared as soon as it is hashed: only the mismatching
    // chunks' numbers are kept (the first kMaxReported of each half, and a
    // count), nothing per chunk.
    struct Mismatches {
        std::vector<uint64_t> first;
        uint64_t count = 0;
        void check(uint64_t k, const Canonical& c, const Canonical& want) {
            if (std::memcmp(&c, &want, sizeof c) == 0) return;
            if (++count <= kMaxReported) first.push_back(k);
        }
    };
    Mismatches half_a, half_b;
    // The stored digests, a window at a time: one reader for each half.
    DigestTable table_b(*d.file, *d.digest);
    // Chunks [0, known) are proven by the read-back: the stored digests of
    // its chunks, folded as it folded its own, give its fold. Else (another
    // file, more chunks than this one, or a different fold) every chunk is
    // read, as without a read-back.
    uint64_t known = 0;
    if (const PagesReadBack* rb = options.pages_read_back;
        rb && rb->pages_offset == d.pages_offset && rb->pages_size == d.pages_size && rb->chunk_bytes == chunk_bytes &&
        rb->chunks <= chunks) {
        DigestFold stored;
        for (uint64_t k = 0; k < rb->chunks; ++k) stored.add(table.at(k));
        const Canonical fold = stored.digest();
        if (std::memcmp(&fold, rb->digest_of_chunks.data(), sizeof fold) == 0) known = rb->chunks;
    }
    std::atomic<uint64_t> pages_done{std::min(d.pages_size, known * chunk_bytes)};
    auto hash_chunks = [&](uint64_t k0, uint64_t k1, std::vector<std::byte>& b, bool report, Mismatches& m,
                           DigestTable& stored) {
        const uint64_t from = k0 * chunk_bytes, to = std::min(d.pages_size, k1 * chunk_bytes);
        if (from >= to) return;
        hash_range(
            *d.file, d.pages_offset + from, to - from, chunk_bytes, b, ".xen_pages", options.drop_behind,
            [&](uint64_t k, const Canonical& c) { m.check(k0 + k, c, stored.at(k0 + k)); },
            [&](uint64_t n) {
                const uint64_t all = pages_done.fetch_add(n) + n;
                if (report && options.on_progress) options.on_progress(all, total);
            });
    };
    in_two_halves(chunks - known, chunks - known >= 64, [&](uint64_t k0, uint64_t k1, bool second) {
        if (!second) return hash_chunks(known + k0, known + k1, buf, true, half_a, table);
        std::vector<std::byte> buf2(kReadSize);
        hash_chunks(known + k0, known + k1, buf2, false, half_b, table_b);
    });
    done = pages_done.load();

    // The first half's chunks come before the second's.
    std::vector<uint64_t> listed = half_a.first;
    listed.insert(listed.end(), half_b.first.begin(), half_b.first.end());
    listed.resize(std::min(listed.size(), kMaxReported));
    const uint64_t mismatches = half_a.count + half_b.count;
    for (uint64_t k : listed) {
        const uint64_t first = k * head.chunk_pages;
        const uint64_t last = std::min(pages, first + head.chunk_pages) - 1;
        out.push_back({"digest-mismatch", "page chunk [" + std::to_string(k) + "]", d.pages_offset + k * chunk_bytes,
                       "pages " + std::to_string(first) + "-" + std::to_string(last) +
                           " do not match their XXH3-128 digest (stored at " + hex(table.offset_of(k)) + ")"});
    }
    if (mismatches > kMaxReported)
        out.push_back({"digest-mismatch", ".xen_pages", d.pages_offset,
                       std::to_string(mismatches - kMaxReported) + " more page chunks do not match their digests"});

    auto check_whole = [&](uint64_t offset, uint64_t size, uint64_t k, const std::string& what) {
        const Canonical want = table.at(k);
        hash_range(
            *d.file, offset, size, size ? size : 1, buf, what, options.drop_behind,
            [&](uint64_t, const Canonical& c) {
                if (std::memcmp(&c, &want, sizeof c) != 0)
                    out.push_back({"digest-mismatch", what, offset,
                                   "does not match its XXH3-128 digest (stored at " + hex(table.offset_of(k)) + ")"});
            },
            progress);
    };
    check_whole(d.notes_offset, d.notes_size, chunks, "note segment");
    check_whole(d.table_offset, d.table_size, chunks + 1, d.table_structure);
    // The windows leave behind the folios that straddle their edges (page
    // cache folios may be larger than a page): one last pass over the file.
    if (options.drop_behind && fd >= 0) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    return out;
}

}  // namespace xendump::reader
