#include "kdump/kdump_file.hpp"

#include <algorithm>
#include <cstring>

#include "kdump/codec.hpp"
#include "kdump/heads.hpp"
#include "reader/check_error.hpp"
#include "reader/checked.hpp"
#include "xendump/format.hpp"
#include "xendump/text.hpp"
#include "util/util.hpp"

namespace xendump::kdump {

using reader::checked_add;
using reader::checked_mul;
using reader::hex;
using reader::range_inside;

namespace {
// A note's descriptor a reader loads (the vcpu contexts: 5168 bytes each).
constexpr uint64_t kMaxNote = 64ull << 20;
using util::kPage;
}  // namespace

namespace {
// Bytes of the first 8 that are not the signature's (8: too short a file).
size_t signature_misses(const reader::DumpFile& file) {
    if (file.size() < kSignature.size()) return kSignature.size();
    char sig[8];
    file.read_exact(0, std::as_writable_bytes(std::span(sig)), "kdump signature");
    size_t n = 0;
    for (size_t i = 0; i < 8; ++i) n += sig[i] != kSignature[i];
    return n;
}
}  // namespace

bool KdumpFile::has_signature(const reader::DumpFile& file) { return signature_misses(file) == 0; }

bool KdumpFile::signature_near_miss(const reader::DumpFile& file) {
    const size_t n = signature_misses(file);
    return n > 0 && n <= 2;
}

void KdumpFile::fail(const char* check, const std::string& structure, uint64_t offset, const std::string& msg) const {
    throw reader::CheckError(Finding{check, structure, offset, msg}, file_->path());
}

KdumpFile::KdumpFile(std::shared_ptr<const reader::DumpFile> file) : file_(std::move(file)) {
    const uint64_t size = file_->size();
    if (size < 2 * kBlockSize)
        fail("kdump-header", "disk_dump_header", 0,
             "the file (" + hex(size) + " bytes) is too short for the header and sub header blocks");
    file_->read_exact(0, std::as_writable_bytes(std::span(&header_, 1)), "disk_dump_header");
    if (std::string_view(header_.signature, 8) != kSignature)
        fail("kdump-header", "disk_dump_header", 0,
             "signature \"" + escape_text(std::string_view(header_.signature, 8)) + "\" is not \"KDUMP   \"");
    if (header_.header_version < 4)
        fail("kdump-header", "disk_dump_header", offsetof(DiskDumpHeader, header_version),
             "header_version " + std::to_string(header_.header_version) + " has no note area (4 or later needed)");
    if (header_.block_size != static_cast<int32_t>(kBlockSize))
        fail("kdump-header", "disk_dump_header", offsetof(DiskDumpHeader, block_size),
             "block_size " + std::to_string(header_.block_size) + " is not the x86 page size 4096");
    // The sub header is 104 bytes in its first block; makedumpfile counts in
    // sub_hdr_size the blocks after it that hold its VMCOREINFO, notes and
    // erase information too (5 in a usual file of its own), and every reader
    // finds the bitmaps after them. This project writes 1; verify holds its
    // files to that through their NT_XEN_KDUMP_HEAD (kdump/heads.cpp).
    if (header_.sub_hdr_size < 1 || (1 + uint64_t(uint32_t(header_.sub_hdr_size))) * kBlockSize > size)
        fail("kdump-header", "disk_dump_header", offsetof(DiskDumpHeader, sub_hdr_size),
             "sub_hdr_size " + std::to_string(header_.sub_hdr_size) +
                 " is not a count of sub header blocks inside the file (" + hex(size) + " bytes)");
    if (header_.bitmap_blocks == 0 || header_.bitmap_blocks % 2 != 0)
        fail("kdump-header", "disk_dump_header", offsetof(DiskDumpHeader, bitmap_blocks),
             "bitmap_blocks " + std::to_string(header_.bitmap_blocks) + " is not a positive even number");
    file_->read_exact(kBlockSize, std::as_writable_bytes(std::span(&sub_, 1)), "kdump_sub_header");
    max_mapnr_ = header_.header_version >= 6 ? sub_.max_mapnr_64 : header_.max_mapnr;
    const uint64_t mapnr_at =
        header_.header_version >= 6 ? kBlockSize + offsetof(KdumpSubHeader, max_mapnr_64) : offsetof(DiskDumpHeader, max_mapnr);
    const std::string mapnr_name = header_.header_version >= 6 ? "max_mapnr_64" : "max_mapnr";

    // Every block count is a u32: these products and sums cannot overflow.
    bitmap_offset_ = (1 + uint64_t(uint32_t(header_.sub_hdr_size))) * kBlockSize;
    bitmap_size_ = uint64_t{header_.bitmap_blocks} / 2 * kBlockSize;
    desc_offset_ = bitmap_offset_ + 2 * bitmap_size_;
    if (!range_inside(bitmap_offset_, 2 * bitmap_size_, size))
        fail("kdump-bitmap", "disk_dump_header", offsetof(DiskDumpHeader, bitmap_blocks),
             "bitmap_blocks " + std::to_string(header_.bitmap_blocks) + ": the bitmaps' " +
                 reader::past_end("offset", bitmap_offset_, "size", 2 * bitmap_size_, size));
    if (max_mapnr_ == 0 || max_mapnr_ / 8 > bitmap_size_ || (max_mapnr_ + 7) / 8 > bitmap_size_)
        fail("kdump-bitmap", header_.header_version >= 6 ? "kdump_sub_header" : "disk_dump_header", mapnr_at,
             mapnr_name + " " + std::to_string(max_mapnr_) + " does not fit bitmaps of " + hex(bitmap_size_) + " bytes");
    // Bitmaps of exactly the blocks max_mapnr needs (makedumpfile's size):
    // larger ones would move the descriptors where a reader does not look.
    if (const uint64_t want = bitmap_blocks_for(max_mapnr_); header_.bitmap_blocks != want)
        fail("kdump-header", "disk_dump_header", offsetof(DiskDumpHeader, bitmap_blocks),
             "bitmap_blocks " + std::to_string(header_.bitmap_blocks) + " is not the " + std::to_string(want) +
                 " blocks of two bitmaps of " + mapnr_name + " " + std::to_string(max_mapnr_) + " frames");
    bitmap1_ = BitmapOnDisk(file_, bitmap_offset_, bitmap_size_, max_mapnr_, "1st bitmap");
    bitmap2_ = BitmapOnDisk(file_, bitmap_offset_ + bitmap_size_, bitmap_size_, max_mapnr_, "2nd bitmap");
    if (const uint64_t pfn = bitmap2_.first_past_frames(); pfn != ~uint64_t{0})
        fail("kdump-bitmap", "2nd bitmap", bitmap_offset_ + bitmap_size_ + pfn / 8,
             "pfn " + std::to_string(pfn) + " is stored but not below " + mapnr_name + " " + std::to_string(max_mapnr_) +
                 " (at " + hex(mapnr_at) + ")");
    // Every stored page has a descriptor in the file.
    const uint64_t stored = bitmap2_.count();
    if (!range_inside(desc_offset_, stored * sizeof(PageDesc), size))
        fail("kdump-descriptors", "page descriptors", desc_offset_,
             std::to_string(stored) + " stored pages need descriptors up to " +
                 hex(desc_offset_ + stored * sizeof(PageDesc)) + ", past the end of the file (" + hex(size) + ")");

    // ELF notes are 4-aligned (the writer puts the area on an 8-byte boundary).
    if (sub_.offset_note % 4 != 0)
        fail("kdump-notes", "kdump_sub_header", kBlockSize + offsetof(KdumpSubHeader, offset_note),
             "offset_note " + hex(sub_.offset_note) + " is not 4-aligned, as ELF notes are");
    if (!range_inside(sub_.offset_note, sub_.size_note, size))
        fail("kdump-notes", "kdump_sub_header",
             kBlockSize + (sub_.offset_note <= size ? offsetof(KdumpSubHeader, size_note) : offsetof(KdumpSubHeader, offset_note)),
             reader::past_end("offset_note", sub_.offset_note, "size_note", sub_.size_note, size));
    // Note by note: the table and the digests stay on disk (the digests
    // bounded by what this many pages need: verify reads them in windows);
    // the unreadable list is at most as large as it can be for this many pages.
    auto limit = [stored](std::string_view name, uint32_t type) -> reader::DescriptorRule {
        if (name == format::kNameXenCore) {
            if (type == format::kNtXenP2m) return 0;
            if (type == format::kNtXenDigest)
                return reader::DescriptorRule::unread_up_to(sizeof(format::DigestDescHead) + 16 * (stored + 2));
            if (type == format::kNtXenUnreadable) return 8 + 8 * stored;
        }
        return kMaxNote;
    };
    notes_ = reader::parse_notes_in_file(*file_, sub_.offset_note, sub_.size_note, "note area", limit, reader::kMaxNotes);
}

uint64_t KdumpFile::shared_zero_pages() const {
    const uint64_t stored = stored_pages();
    const uint64_t table_end = desc_offset_ + stored * sizeof(PageDesc);  // inside the file (constructor)
    const uint64_t at[2] = {table_end, (table_end + kBlockSize - 1) / kBlockSize * kBlockSize};
    bool zeros[2] = {false, false};
    std::vector<std::byte> page(kPage);
    for (int k = 0; k < 2; ++k) {
        if (!range_inside(at[k], kPage, file_->size())) continue;
        file_->read_exact(at[k], page, "shared zero page");
        zeros[k] = std::all_of(page.begin(), page.end(), [](std::byte b) { return b == std::byte{0}; });
    }
    if (!zeros[0] && !zeros[1]) return 0;
    constexpr uint64_t kWindow = 4096;  // descriptors read at once (96 KiB)
    std::vector<PageDesc> descs;
    uint64_t n = 0;
    for (uint64_t first = 0; first < stored; first += kWindow) {
        descs.resize(static_cast<size_t>(std::min(kWindow, stored - first)));
        file_->read_exact(desc_offset_ + first * sizeof(PageDesc), std::as_writable_bytes(std::span(descs)),
                          "page descriptor " + std::to_string(first));
        for (const PageDesc& d : descs)
            if (d.flags == 0 && d.size == kPage && ((zeros[0] && d.offset == at[0]) || (zeros[1] && d.offset == at[1])))
                ++n;
    }
    return n;
}

PageDesc KdumpFile::descriptor(uint64_t index) const {
    if (index >= stored_pages())
        throw Error("page index " + std::to_string(index) + " is past the stored pages (" +
                        std::to_string(stored_pages()) + ")",
                    file_->path());
    std::lock_guard lock(cache_->mutex);
    ReadCache& c = *cache_;
    if (index >= c.first && index - c.first < c.descs.size()) return c.descs[index - c.first];
    // Up to 256 from `index`, those the file holds whole (a file cut short
    // fails on the descriptor asked for, as when read alone).
    const uint64_t at = desc_offset_ + index * sizeof(PageDesc);
    const uint64_t in_file = at < file_->size() ? (file_->size() - at) / sizeof(PageDesc) : 0;
    const uint64_t n = std::max<uint64_t>(1, std::min<uint64_t>({256, stored_pages() - index, in_file}));
    c.descs.clear();
    c.descs.resize(static_cast<size_t>(n));
    file_->read_exact(at, std::as_writable_bytes(std::span(c.descs)), "page descriptor " + std::to_string(index));
    c.first = index;
    return c.descs.front();
}

std::string KdumpFile::try_read_page(uint64_t index, std::span<std::byte> out, uint64_t& where) const {
    where = desc_offset_ + index * sizeof(PageDesc);
    if (out.size() < kPage) return "page buffer smaller than a page";
    out = out.first(kPage);
    const PageDesc d = descriptor(index);
    // What went wrong names the frame the page is filed under (found only then).
    auto what = [&] {
        return "page descriptor " + std::to_string(index) + " (frame " + hex(bitmap2_.select(index)) + ")";
    };
    if (d.size == 0 || d.size > kPage) return what() + ": size " + std::to_string(d.size) + " is not 1 to 4096 bytes";
    if (!known_page_flags(d.flags)) return what() + ": unknown compression flags " + hex(d.flags);
    if (d.flags == 0 && d.size != kPage) return what() + ": a raw page of " + std::to_string(d.size) + " bytes";
    if (!range_inside(d.offset, d.size, file_->size()))
        return what() + ": " + reader::past_end("offset", d.offset, "size", d.size, file_->size());
    where = d.offset;
    auto same = [&d](const PageDesc& o) { return o.offset == d.offset && o.size == d.size && o.flags == d.flags; };
    {
        std::lock_guard lock(cache_->mutex);
        if (cache_->have_last && same(cache_->last)) {
            std::memcpy(out.data(), cache_->page.data(), kPage);
            return {};
        }
    }
    const std::string data = "page data of descriptor " + std::to_string(index);
    if (d.flags == 0) {
        file_->read_exact(d.offset, out, data);
    } else {
        std::byte in[kPage];
        file_->read_exact(d.offset, std::span(in, d.size), data);
        thread_local PageDecompressor decompressor;
        std::string e = decompressor.decompress(d.flags, std::span(in, d.size), out);
        if (!e.empty()) return "page data of " + what() + ": " + e;
    }
    std::lock_guard lock(cache_->mutex);
    cache_->last = d;
    cache_->have_last = true;
    cache_->page.assign(out.begin(), out.end());
    return {};
}

void KdumpFile::read_page(uint64_t index, std::span<std::byte> out) const {
    uint64_t where = 0;
    std::string e = try_read_page(index, out, where);
    if (!e.empty()) throw Error(e, file_->path(), where);
}

}  // namespace xendump::kdump
