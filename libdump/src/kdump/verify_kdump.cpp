// xen-dumpctl verify of a compact (kdump) file: the structure (bitmaps,
// descriptors, notes against the header) and, reading every stored page
// once, that it decompresses to a page and, with digests, that the pages in
// pfn order match NT_XEN_DIGEST's chunk digests (so a flipped bit in a
// compressed page, or a descriptor pointing at another page, is caught),
// with the digests of the note area before the digest note and of the table.
#include <xxhash.h>

#include <cstring>

#include "kdump/kdump_file.hpp"
#include "kdump/note_area.hpp"
#include "reader/check_error.hpp"
#include "reader/checked.hpp"
#include "reader/reader_impl.hpp"
#include "stream_hash.hpp"

namespace xendump::reader {

namespace {

constexpr uint64_t kPage = format::kPageSize;
using Canonical = XXH128_canonical_t;

void check_structure(const DumpReader::Impl& d, const kdump::KdumpFile& k, FindingList& out) {
    const auto& b1 = k.present_bitmap();
    const auto& b2 = k.stored_bitmap();
    for (uint64_t i = 0; i < b2.size(); ++i)
        if ((b2[i] & ~b1[i]) != std::byte{0})
            out.add({"kdump-bitmap", "2nd bitmap", k.bitmap_offset() + k.bitmap_size() + i,
                     "pages stored (2nd bitmap) that do not exist (1st bitmap) around pfn " + hex(i * 8)});
    const uint64_t n = d.entries->size();
    if (d.header.xch_nr_pages != n)
        out.add({"header-pages", "NT_XEN_HEADER note", d.notes_offset,
                 "nr_pages " + std::to_string(d.header.xch_nr_pages) + " but the 2nd bitmap stores " +
                     std::to_string(n) + " pages"});
    if (static_cast<uint64_t>(k.header().nr_cpus) != d.vcpus.size())
        out.add({"kdump-header", "disk_dump_header", offsetof(kdump::DiskDumpHeader, nr_cpus),
                 "nr_cpus " + std::to_string(k.header().nr_cpus) + " but the notes hold " +
                     std::to_string(d.vcpus.size()) + " vcpu contexts"});
    const auto& sub = k.sub_header();
    if (sub.size_vmcoreinfo != 0 &&
        (!range_inside(sub.offset_vmcoreinfo, sub.size_vmcoreinfo, k.file().size()) ||
         sub.offset_vmcoreinfo < sub.offset_note || sub.offset_vmcoreinfo - sub.offset_note > sub.size_note ||
         sub.offset_note + sub.size_note - sub.offset_vmcoreinfo < sub.size_vmcoreinfo))
        out.add({"kdump-notes", "kdump_sub_header", kdump::kBlockSize + offsetof(kdump::KdumpSubHeader, offset_vmcoreinfo),
                 "offset_vmcoreinfo " + hex(sub.offset_vmcoreinfo) + " + size_vmcoreinfo " + hex(sub.size_vmcoreinfo) +
                     " is not inside the note area"});
    const uint64_t data_start = k.desc_offset() + n * sizeof(kdump::PageDesc);
    for (uint64_t i = 0; i < n; ++i) {
        const kdump::PageDesc pd = k.descriptor(i);
        if (pd.offset < data_start)
            out.add({"kdump-page", "page descriptor " + std::to_string(i), k.desc_offset() + i * sizeof pd,
                     "data offset " + hex(pd.offset) + " is inside the headers, bitmaps or descriptors (before " +
                         hex(data_start) + ")"});
    }
}

}  // namespace

std::vector<Finding> check_kdump(const DumpReader::Impl& d, const VerifyOptions& options) {
    std::vector<Finding> findings;
    FindingList out(findings);
    const kdump::KdumpFile& k = *d.kdump;
    check_structure(d, k, out);

    const bool digests = options.digests && d.digest;
    const uint64_t n = d.entries->size();
    const Note* note = d.digest;
    format::DigestDescHead head{};
    uint64_t chunks = 0;
    if (digests) {
        if (note->desc.size() >= sizeof head) std::memcpy(&head, note->desc.data(), sizeof head);
        chunks = head.chunk_pages ? (n + head.chunk_pages - 1) / head.chunk_pages : 0;
        if (note->desc.size() < sizeof head || head.algorithm != format::kDigestXxh3_128 || head.chunk_pages == 0 ||
            note->desc.size() != sizeof head + 16 * (chunks + 2)) {
            out.add({"digest-format", "NT_XEN_DIGEST note", note->offset,
                     "algorithm " + std::to_string(head.algorithm) + ", chunk_pages " + std::to_string(head.chunk_pages) +
                         ", descsz " + std::to_string(note->desc.size()) + ": expected algorithm 1 (XXH3-128) and " +
                         std::to_string(sizeof head + 16 * (chunks + 2)) + " bytes for " + std::to_string(n) + " pages"});
            out.finish();
            return findings;
        }
    }
    auto stored = [&](uint64_t i) {
        Canonical c;
        std::memcpy(&c, note->desc.data() + sizeof head + 16 * i, sizeof c);
        return c;
    };
    auto mismatch = [&](const std::string& what, uint64_t offset, uint64_t i, const std::string& detail) {
        out.add({"digest-mismatch", what, offset,
                 detail + " does not match its XXH3-128 digest (stored at " +
                     hex(note->desc_offset + sizeof head + 16 * i) + ")"});
    };

    // Every page once: it must decompress; with digests, its bytes go to its chunk.
    std::optional<ChunkedHash> hash;
    if (digests) hash.emplace(uint64_t{head.chunk_pages} * kPage);
    uint64_t chunk = 0, chunk_first = 0;
    std::vector<std::byte> page(kPage);
    auto close_chunk = [&](const Canonical& c) {
        const Canonical want = stored(chunk);
        if (std::memcmp(&c, &want, sizeof c) != 0) {
            const uint64_t last = std::min(n, chunk_first + head.chunk_pages) - 1;
            mismatch("page chunk [" + std::to_string(chunk) + "]", k.desc_offset() + chunk_first * sizeof(kdump::PageDesc),
                     chunk, "pages " + std::to_string(chunk_first) + "-" + std::to_string(last) + " (pfns " +
                                hex((*d.entries)[chunk_first].pfn) + "-" + hex((*d.entries)[last].pfn) + ")");
        }
        ++chunk;
        chunk_first += head.chunk_pages;
    };
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t where = 0;
        std::string e = k.try_read_page(d.kdump_desc(i), page, where);
        if (!e.empty()) {
            out.add({"kdump-page", "page " + std::to_string(i), where, e});
            std::fill(page.begin(), page.end(), std::byte{0});
        }
        if (hash) hash->update(page.data(), kPage, close_chunk);
        if (options.on_progress && (i % 4096 == 0 || i + 1 == n)) options.on_progress(i + 1, n);
    }
    if (hash && hash->pending()) close_chunk(hash->finish());
    if (digests) {
        // The note area up to the digest note, and the table as a v1 file stores it.
        const uint64_t before = note->offset - d.notes_offset;
        const auto bytes = d.file->read_bytes(d.notes_offset, before, "note area");
        Canonical c, want = stored(chunks);
        XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), bytes.size()));
        if (std::memcmp(&c, &want, sizeof c) != 0) mismatch("note area", d.notes_offset, chunks, "the note area");
        c = kdump::table_digest(*d.entries, d.type == format::GuestType::pv);
        want = stored(chunks + 1);
        if (std::memcmp(&c, &want, sizeof c) != 0)
            mismatch(d.table_structure, d.table_offset, chunks + 1, "the page table (bitmap and PFN->GMFN entries)");
    }
    out.finish();
    return findings;
}

}  // namespace xendump::reader
