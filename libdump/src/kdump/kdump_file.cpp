#include "kdump/kdump_file.hpp"

#include <bit>
#include <cstring>

#include "kdump/codec.hpp"
#include "reader/check_error.hpp"
#include "reader/checked.hpp"
#include "xendump/format.hpp"

namespace xendump::kdump {

using reader::checked_add;
using reader::checked_mul;
using reader::hex;
using reader::range_inside;

namespace {
// The note area is read whole; a PV guest's table is 16 bytes a page in it.
constexpr uint64_t kMaxNoteArea = 1ull << 31;
constexpr uint64_t kPage = format::kPageSize;
}  // namespace

bool KdumpFile::has_signature(const reader::DumpFile& file) {
    if (file.size() < kSignature.size()) return false;
    char sig[8];
    file.read_exact(0, std::as_writable_bytes(std::span(sig)), "kdump signature");
    return std::string_view(sig, 8) == kSignature;
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
        fail("kdump-header", "disk_dump_header", 0, "signature is not \"KDUMP   \"");
    if (header_.header_version < 4)
        fail("kdump-header", "disk_dump_header", offsetof(DiskDumpHeader, header_version),
             "header_version " + std::to_string(header_.header_version) + " has no note area (4 or later needed)");
    if (header_.block_size != static_cast<int32_t>(kBlockSize))
        fail("kdump-header", "disk_dump_header", offsetof(DiskDumpHeader, block_size),
             "block_size " + std::to_string(header_.block_size) + " is not the x86 page size 4096");
    if (header_.sub_hdr_size < 1)
        fail("kdump-header", "disk_dump_header", offsetof(DiskDumpHeader, sub_hdr_size),
             "sub_hdr_size " + std::to_string(header_.sub_hdr_size) + " is not at least one block");
    if (header_.bitmap_blocks == 0 || header_.bitmap_blocks % 2 != 0)
        fail("kdump-header", "disk_dump_header", offsetof(DiskDumpHeader, bitmap_blocks),
             "bitmap_blocks " + std::to_string(header_.bitmap_blocks) + " is not a positive even number");
    file_->read_exact(kBlockSize, std::as_writable_bytes(std::span(&sub_, 1)), "kdump_sub_header");
    max_mapnr_ = header_.header_version >= 6 ? sub_.max_mapnr_64 : header_.max_mapnr;

    // Every block count is a u32: these products and sums cannot overflow.
    bitmap_offset_ = (1 + uint64_t(uint32_t(header_.sub_hdr_size))) * kBlockSize;
    bitmap_size_ = uint64_t{header_.bitmap_blocks} / 2 * kBlockSize;
    desc_offset_ = bitmap_offset_ + 2 * bitmap_size_;
    if (!range_inside(bitmap_offset_, 2 * bitmap_size_, size))
        fail("kdump-bitmap", "bitmaps", bitmap_offset_,
             reader::past_end("offset", bitmap_offset_, "size", 2 * bitmap_size_, size));
    if (max_mapnr_ == 0 || max_mapnr_ / 8 > bitmap_size_ || (max_mapnr_ + 7) / 8 > bitmap_size_)
        fail("kdump-bitmap", "kdump_sub_header", kBlockSize + offsetof(KdumpSubHeader, max_mapnr_64),
             "max_mapnr " + std::to_string(max_mapnr_) + " does not fit bitmaps of " + hex(bitmap_size_) + " bytes");
    bitmap1_ = file_->read_bytes(bitmap_offset_, bitmap_size_, "1st bitmap");
    bitmap2_ = file_->read_bytes(bitmap_offset_ + bitmap_size_, bitmap_size_, "2nd bitmap");

    // Count before allocating: every stored page has a descriptor in the file.
    uint64_t stored = 0;
    for (uint64_t i = 0; i + 8 <= bitmap_size_; i += 8) {
        uint64_t w;
        std::memcpy(&w, bitmap2_.data() + i, 8);
        stored += static_cast<uint64_t>(std::popcount(w));
    }
    for (uint64_t pfn = max_mapnr_; pfn < bitmap_size_ * 8; ++pfn)
        if (test_bit(bitmap2_.data(), pfn))
            fail("kdump-bitmap", "2nd bitmap", bitmap_offset_ + bitmap_size_ + pfn / 8,
                 "pfn " + std::to_string(pfn) + " is stored but not below max_mapnr " + std::to_string(max_mapnr_));
    if (!range_inside(desc_offset_, stored * sizeof(PageDesc), size))
        fail("kdump-descriptors", "page descriptors", desc_offset_,
             std::to_string(stored) + " stored pages need descriptors up to " +
                 hex(desc_offset_ + stored * sizeof(PageDesc)) + ", past the end of the file (" + hex(size) + ")");
    entries_ = std::make_shared<reader::EntryTable>(stored);
    uint64_t k = 0;
    for (uint64_t byte = 0; byte < (max_mapnr_ + 7) / 8; ++byte) {
        unsigned bits = std::to_integer<unsigned>(bitmap2_[byte]);
        while (bits) {
            const unsigned b = static_cast<unsigned>(std::countr_zero(bits));
            bits &= bits - 1;
            const uint64_t pfn = byte * 8 + b;
            (*entries_)[k++] = {pfn, pfn};
        }
    }

    if (!range_inside(sub_.offset_note, sub_.size_note, size))
        fail("kdump-notes", "kdump_sub_header", kBlockSize + offsetof(KdumpSubHeader, offset_note),
             reader::past_end("offset_note", sub_.offset_note, "size_note", sub_.size_note, size));
    if (sub_.size_note > kMaxNoteArea)
        fail("kdump-notes", "kdump_sub_header", kBlockSize + offsetof(KdumpSubHeader, size_note),
             "size_note " + hex(sub_.size_note) + " is more than a reader loads (" + hex(kMaxNoteArea) + ")");
    const auto bytes = file_->read_bytes(sub_.offset_note, sub_.size_note, "note area");
    notes_ = reader::parse_notes(bytes, sub_.offset_note, "note area");
}

PageDesc KdumpFile::descriptor(uint64_t index) const {
    if (index >= entries_->size())
        throw Error("page index " + std::to_string(index) + " is past the stored pages (" +
                        std::to_string(entries_->size()) + ")",
                    file_->path());
    PageDesc d;
    file_->read_exact(desc_offset_ + index * sizeof d, std::as_writable_bytes(std::span(&d, 1)),
                      "page descriptor " + std::to_string(index));
    return d;
}

std::string KdumpFile::try_read_page(uint64_t index, std::span<std::byte> out, uint64_t& where) const {
    where = desc_offset_ + index * sizeof(PageDesc);
    if (out.size() < kPage) return "page buffer smaller than a page";
    out = out.first(kPage);
    const PageDesc d = descriptor(index);
    const uint64_t pfn = (*entries_)[index].pfn;  // the frame it is filed under
    const std::string what = "page descriptor " + std::to_string(index) + " (frame " + hex(pfn) + ")";
    if (d.size == 0 || d.size > kPage) return what + ": size " + std::to_string(d.size) + " is not 1 to 4096 bytes";
    if (!known_page_flags(d.flags)) return what + ": unknown compression flags " + hex(d.flags);
    if (d.flags == 0 && d.size != kPage) return what + ": a raw page of " + std::to_string(d.size) + " bytes";
    if (!range_inside(d.offset, d.size, file_->size()))
        return what + ": " + reader::past_end("offset", d.offset, "size", d.size, file_->size());
    where = d.offset;
    if (d.flags == 0) {
        file_->read_exact(d.offset, out, "page data of pfn " + hex(pfn));
        return {};
    }
    std::byte in[kPage];
    file_->read_exact(d.offset, std::span(in, d.size), "page data of pfn " + hex(pfn));
    thread_local PageDecompressor decompressor;
    std::string e = decompressor.decompress(d.flags, std::span(in, d.size), out);
    if (!e.empty()) return "page data of frame " + hex(pfn) + " (" + what + "): " + e;
    return {};
}

void KdumpFile::read_page(uint64_t index, std::span<std::byte> out) const {
    uint64_t where = 0;
    std::string e = try_read_page(index, out, where);
    if (!e.empty()) throw Error(e, file_->path(), where);
}

}  // namespace xendump::kdump
