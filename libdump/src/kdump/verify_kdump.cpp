// xen-dumpctl verify of a compact (kdump) file: the structure (bitmaps,
// descriptors, notes against the header) and, reading every stored page
// once, that it decompresses to a page and, with digests, that the pages in
// pfn order match NT_XEN_DIGEST's chunk digests (so a flipped bit in a
// compressed page, or a descriptor pointing at another page, is caught),
// with the digests of the note area before the digest note and of the table;
// and block 0 and the sub header, every byte, against the two blocks
// rebuilt from the notes (kdump/heads.hpp), the bitmaps against the digests
// NT_XEN_KDUMP_HEAD records.
#include <xxhash.h>

#include <cstring>

#include "util/util.hpp"
#include "xendump/text.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "kdump/heads.hpp"
#include "kdump/kdump_file.hpp"
#include "kdump/note_area.hpp"
#include "reader/check_error.hpp"
#include "reader/checked.hpp"
#include "reader/digest_table.hpp"
#include "reader/reader_impl.hpp"
#include "stream_hash.hpp"

namespace xendump::reader {

namespace {

using util::kPage;
using Canonical = XXH128_canonical_t;

// What check_structure finds on the way for check_heads: the bitmaps'
// digests and the end of the page data.
struct Seen {
    Canonical bitmap[2]{};
    uint64_t data_end = 0;
};

Seen check_structure(const DumpReader::Impl& d, const kdump::KdumpFile& k, FindingList& out) {
    Seen seen;
    // Stored (2nd bitmap) only what exists (1st), a block at a time; both hashed.
    const kdump::BitmapOnDisk& b1 = k.present_bitmap();
    const kdump::BitmapOnDisk& b2 = k.stored_bitmap();
    StreamHash h1, h2;
    std::vector<std::byte> w1(kdump::BitmapOnDisk::kBlockBytes), w2(w1.size());
    for (uint64_t at = 0; at < b2.bytes(); at += w1.size()) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(w1.size(), b2.bytes() - at));
        b1.read(at, std::span(w1).first(n));
        b2.read(at, std::span(w2).first(n));
        h1.update(w1.data(), n);
        h2.update(w2.data(), n);
        for (size_t i = 0; i < n; ++i)
            if ((w2[i] & ~w1[i]) != std::byte{0})
                out.add({"kdump-bitmap", "2nd bitmap", b2.offset() + at + i,
                         "pages stored (2nd bitmap) that do not exist (1st bitmap) around pfn " + hex((at + i) * 8)});
    }
    seen.bitmap[0] = h1.finish_and_reset();
    seen.bitmap[1] = h2.finish_and_reset();
    const uint64_t n = d.nr_entries();
    if (d.header.xch_nr_pages != n)
        out.add({"header-pages", "NT_XEN_HEADER note", d.notes_offset,
                 "nr_pages " + std::to_string(d.header.xch_nr_pages) + " but the 2nd bitmap stores " +
                     std::to_string(n) + " pages"});
    const auto& sub = k.sub_header();
    if (sub.size_vmcoreinfo != 0 &&
        (!range_inside(sub.offset_vmcoreinfo, sub.size_vmcoreinfo, k.file().size()) ||
         sub.offset_vmcoreinfo < sub.offset_note || sub.offset_vmcoreinfo - sub.offset_note > sub.size_note ||
         sub.offset_note + sub.size_note - sub.offset_vmcoreinfo < sub.size_vmcoreinfo))
        out.add({"kdump-notes", "kdump_sub_header", kdump::kBlockSize + offsetof(kdump::KdumpSubHeader, offset_vmcoreinfo),
                 "offset_vmcoreinfo " + hex(sub.offset_vmcoreinfo) + " + size_vmcoreinfo " + hex(sub.size_vmcoreinfo) +
                     " is not inside the note area"});
    // A PV guest's table names each stored frame once (open checked that
    // every frame it names is stored, and that there are as many).
    if (d.type == format::GuestType::pv) {
        const auto& x = d.gmfn_extents();
        for (size_t i = 1; i < x.size(); ++i)
            if (x[i - 1].end_max > x[i].gmfn)
                out.add({"kdump-table", d.table_structure, d.table_offset + x[i].index * sizeof(PageEntry),
                         "entry " + std::to_string(x[i].index) + ": machine frame " + hex(x[i].gmfn) +
                             " is named by an earlier entry too"});
    }
    // The descriptors, a window at a time: data after the descriptors.
    const uint64_t data_start = k.desc_offset() + n * sizeof(kdump::PageDesc);
    // The page data starts after the shared zero page's block (kdump/layout.hpp).
    seen.data_end = (data_start + kdump::kBlockSize - 1) / kdump::kBlockSize * kdump::kBlockSize + kdump::kBlockSize;
    std::vector<kdump::PageDesc> descs(4096);
    for (uint64_t at = 0; at < n; at += descs.size()) {
        const size_t m = static_cast<size_t>(std::min<uint64_t>(descs.size(), n - at));
        k.file().read_exact(k.desc_offset() + at * sizeof(kdump::PageDesc),
                            std::as_writable_bytes(std::span(descs).first(m)), "page descriptors");
        for (size_t i = 0; i < m; ++i) {
            if (descs[i].offset < data_start)
                out.add({"kdump-page", "page descriptor " + std::to_string(at + i),
                         k.desc_offset() + (at + i) * sizeof(kdump::PageDesc),
                         "data offset " + hex(descs[i].offset) + " is inside the headers, bitmaps or descriptors (before " +
                             hex(data_start) + ")"});
            if (descs[i].offset <= UINT64_MAX - descs[i].size)
                seen.data_end = std::max(seen.data_end, descs[i].offset + descs[i].size);
        }
    }
    return seen;
}

// A field's value as a message shows it.
std::string field_value(const kdump::HeadField& f, std::span<const std::byte> b) {
    if (f.text) {
        std::string_view t(reinterpret_cast<const char*>(b.data()), b.size());
        return "\"" + escape_text(t.substr(0, t.find('\0'))) + "\"";
    }
    if (f.size == 4 || f.size == 8) {
        uint64_t v = 0;
        std::memcpy(&v, b.data(), f.size);
        return hex(v);
    }
    std::string s;
    for (size_t i = 0; i < std::min<size_t>(b.size(), 16); ++i) s += (i ? " " : "") + hex(std::to_integer<uint64_t>(b[i]));
    return "bytes " + s + (b.size() > 16 ? " ..." : "");
}

// Block 0 and the sub header against the two blocks make_heads builds from
// what the notes record (the writer's own function), field by field; the
// bitmaps against NT_XEN_KDUMP_HEAD's digests. A file written before that
// note has its utsname, status and dump level taken as they are.
void check_heads(const DumpReader::Impl& d, const kdump::KdumpFile& k, const Seen& seen, FindingList& out) {
    kdump::HeadFacts f;
    const Note* head = d.notes.find(format::kNameXenCore, format::kNtXenKdumpHead);
    if (head && head->desc.size() != sizeof(kdump::HeadNote)) {
        out.add({"kdump-header", "NT_XEN_KDUMP_HEAD note", head->offset,
                 "descsz " + std::to_string(head->desc_size) + " is not " + std::to_string(sizeof(kdump::HeadNote))});
        head = nullptr;
    }
    if (head) {
        std::memcpy(&f.recorded, head->desc.data(), sizeof f.recorded);
        for (int i = 0; i < 2; ++i)
            if (std::memcmp(f.recorded.bitmap_digest[i], &seen.bitmap[i], sizeof seen.bitmap[i]) != 0) {
                const kdump::BitmapOnDisk& b = i == 0 ? k.present_bitmap() : k.stored_bitmap();
                const std::string name = i == 0 ? "1st bitmap" : "2nd bitmap";
                out.add({"kdump-bitmap", name, b.offset(),
                         "the " + name + " (" + hex(b.bytes()) + " bytes) does not match its XXH3-128 digest in "
                         "NT_XEN_KDUMP_HEAD (note at " + hex(head->offset) + ")"});
            }
    } else {
        f.recorded.status = k.header().status;
        f.recorded.dump_level = k.sub_header().dump_level;
        f.recorded.utsname = k.header().utsname;
    }
    f.time = kdump::dump_time(d.domain);
    f.nr_cpus = d.vcpus.size();
    const kdump::BitmapOnDisk& b1 = k.present_bitmap();
    const kdump::BitmapOnDisk& b2 = k.stored_bitmap();
    f.max_mapnr = std::max({b1.count() ? b1.select(b1.count() - 1) + 1 : 1, b2.count() ? b2.select(b2.count() - 1) + 1 : 1});
    if (const Note* vi = d.notes.find(format::kNameVmcoreinfo, format::kNtVmcoreinfo)) {
        // The text without the zeros that pad the descriptor to 8 bytes.
        std::string text(reinterpret_cast<const char*>(vi->desc.data()), vi->desc.size());
        text.erase(text.find_last_not_of('\0') + 1);
        if (auto info = kernel::Vmcoreinfo::parse(text)) f.phys_base = info->phys_base();
        if (!text.empty()) {
            f.offset_vmcoreinfo = vi->desc_offset;
            f.size_vmcoreinfo = text.size();
        }
    }
    // The note area follows the page data (8-aligned) to the end of the file.
    f.offset_note = (seen.data_end + 7) / 8 * 8;
    f.size_note = k.file().size() > f.offset_note ? k.file().size() - f.offset_note : 0;

    const std::vector<std::byte> want = kdump::head_blocks(kdump::make_heads(f));
    std::vector<std::byte> have(want.size());
    k.file().read_exact(0, have, "disk_dump_header and kdump_sub_header");
    for (const kdump::HeadField& field : kdump::head_fields()) {
        const auto a = std::span(have).subspan(field.offset, field.size);
        const auto b = std::span(want).subspan(field.offset, field.size);
        if (std::memcmp(a.data(), b.data(), a.size()) == 0) continue;
        out.add({"kdump-header", std::string(field.structure), field.offset,
                 std::string(field.name) + " is " + field_value(field, a) + ", not " + field_value(field, b) + " (from " +
                     std::string(field.source) + ")"});
    }
}

// XXH3-128 of [offset, offset + size) of the file, read a window at a time.
Canonical digest_of_range(const DumpFile& file, uint64_t offset, uint64_t size, const std::string& structure) {
    StreamHash h;
    std::vector<std::byte> w(1 << 20);
    for (uint64_t at = 0; at < size; at += w.size()) {
        const size_t m = static_cast<size_t>(std::min<uint64_t>(w.size(), size - at));
        file.read_exact(offset + at, std::span(w).first(m), structure);
        h.update(w.data(), m);
    }
    return h.finish_and_reset();
}

// The table as a v1 file stores it ({pfn, gmfn}; HVM and PVH: gmfn = pfn,
// as the made table has it), a window at a time.
Canonical digest_of_table(const DumpReader::Impl& d) {
    StreamHash h;
    std::vector<PageEntry> w(TableOnDisk::kWindow);
    for (uint64_t at = 0; at < d.table.size(); at += w.size()) {
        const size_t m = static_cast<size_t>(std::min<uint64_t>(w.size(), d.table.size() - at));
        d.table.read(at, std::span(w).first(m));
        h.update(w.data(), m * sizeof(PageEntry));
    }
    return h.finish_and_reset();
}

}  // namespace

std::vector<Finding> check_kdump(const DumpReader::Impl& d, const VerifyOptions& options) {
    std::vector<Finding> findings;
    FindingList out(findings);
    const kdump::KdumpFile& k = *d.kdump;
    check_heads(d, k, check_structure(d, k, out), out);

    const bool digests = options.digests && d.digest;
    const uint64_t n = d.nr_entries();
    std::optional<DigestTable> table;  // the stored digests, a window at a time
    uint64_t chunks = 0, chunk_pages = 0;
    if (digests) {
        table.emplace(*d.file, *d.digest);
        if (auto bad = table->format_problem(n)) {
            out.add(std::move(*bad));
            out.finish();
            return findings;
        }
        chunks = table->chunks(n);
        chunk_pages = table->head().chunk_pages;
    }
    auto mismatch = [&](const std::string& what, uint64_t offset, uint64_t i, const std::string& detail) {
        out.add({"digest-mismatch", what, offset,
                 detail + " does not match its XXH3-128 digest (stored at " + hex(table->offset_of(i)) + ")"});
    };

    // Every page once: it must decompress; with digests, its bytes go to its chunk.
    std::optional<ChunkedHash> hash;
    if (digests) hash.emplace(chunk_pages * kPage);
    uint64_t chunk = 0, chunk_first = 0;
    std::vector<std::byte> page(kPage);
    auto close_chunk = [&](const Canonical& c) {
        const Canonical want = table->at(chunk);
        if (std::memcmp(&c, &want, sizeof c) != 0) {
            const uint64_t last = std::min(n, chunk_first + chunk_pages) - 1;
            mismatch("page chunk [" + std::to_string(chunk) + "]", k.desc_offset() + chunk_first * sizeof(kdump::PageDesc),
                     chunk, "pages " + std::to_string(chunk_first) + "-" + std::to_string(last) + " (pfns " +
                                hex(d.pfn_of_index(chunk_first)) + "-" + hex(d.pfn_of_index(last)) + ")");
        }
        ++chunk;
        chunk_first += chunk_pages;
    };
    // The table in pfn order, a window at a time: each page's descriptor.
    std::vector<PageEntry> entries(TableOnDisk::kWindow);
    for (uint64_t i = 0; i < n; ++i) {
        if (i % entries.size() == 0)
            d.table.read(i, std::span(entries).first(static_cast<size_t>(std::min<uint64_t>(entries.size(), n - i))));
        uint64_t where = 0;
        std::string e = k.try_read_page(d.kdump_desc(i, entries[i % entries.size()].gmfn), page, where);
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
        Canonical c = digest_of_range(*d.file, d.notes_offset, d.digest->offset - d.notes_offset, "note area");
        Canonical want = table->at(chunks);
        if (std::memcmp(&c, &want, sizeof c) != 0) mismatch("note area", d.notes_offset, chunks, "the note area");
        c = digest_of_table(d);
        want = table->at(chunks + 1);
        if (std::memcmp(&c, &want, sizeof c) != 0)
            mismatch(d.table_structure, d.table_offset, chunks + 1, "the page table (bitmap and PFN->GMFN entries)");
    }
    out.finish();
    return findings;
}

}  // namespace xendump::reader
