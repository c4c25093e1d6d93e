// Reading a kdump file (kdump/format.hpp) from an untrusted file: every
// offset, size and count is checked against the file before it is used,
// and every failure names the file and the offset of the structure. Nothing
// that grows with the guest is held: the bitmaps stay on disk (a block
// cache and a count of set bits per 32768 frames), the descriptors are
// read 256 at a time (6 KiB) and the pages one by one, the last page read
// kept so that the pages sharing its data (the shared zero page) are not
// read again, and the note area's NT_XEN_P2M descriptor (a PV guest's table,
// 16 bytes a page) is left unread for reader::TableOnDisk, its NT_XEN_DIGEST
// descriptor (16 bytes a 256-page chunk) for reader::DigestTable.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kdump/bitmap_on_disk.hpp"
#include "kdump/format.hpp"
#include "reader/dump_file.hpp"
#include "reader/notes.hpp"

namespace xendump::kdump {

class KdumpFile {
public:
    // True when the file starts with the "KDUMP   " signature.
    static bool has_signature(const reader::DumpFile& file);
    // True when the first 8 bytes are the signature but for one or two: a
    // compact file whose signature was changed, opened (and refused) as one
    // to say so.
    static bool signature_near_miss(const reader::DumpFile& file);

    // Parses the header, sub header, bitmaps (one counting pass) and note
    // area. Throws reader::CheckError when the file cannot be used.
    explicit KdumpFile(std::shared_ptr<const reader::DumpFile> file);

    const reader::DumpFile& file() const { return *file_; }
    const DiskDumpHeader& header() const { return header_; }
    const KdumpSubHeader& sub_header() const { return sub_; }
    uint64_t max_mapnr() const { return max_mapnr_; }
    uint64_t bitmap_offset() const { return bitmap_offset_; }
    uint64_t bitmap_size() const { return bitmap_size_; }  // of each
    uint64_t desc_offset() const { return desc_offset_; }
    const BitmapOnDisk& present_bitmap() const { return bitmap1_; }  // the 1st: frames that exist
    // The 2nd: frames stored (pfns; a PV guest's machine frames). Stored
    // page k (ascending frame) has descriptor k: a frame's descriptor is its
    // rank.
    const BitmapOnDisk& stored_bitmap() const { return bitmap2_; }
    uint64_t stored_pages() const { return bitmap2_.count(); }
    // The notes; NT_XEN_P2M's and NT_XEN_DIGEST's descriptors are not read
    // (Note::desc empty: they lie at desc_offset, desc_size bytes).
    const reader::NoteList& notes() const { return notes_; }

    // The stored pages whose descriptor points at the file's shared zero
    // page (raw, 4096 bytes, at the end of the descriptor table as
    // makedumpfile puts it, or at the next block as ours do; only a page
    // there that reads as zeros counts): its zero pages. Reads every
    // descriptor, a window at a time.
    uint64_t shared_zero_pages() const;

    // Descriptor of stored page `index` (checked: inside the file).
    PageDesc descriptor(uint64_t index) const;
    // Reads and decompresses stored page `index` into `out` (a page). Throws
    // Error naming the file and the offset of the descriptor or the data.
    void read_page(uint64_t index, std::span<std::byte> out) const;
    // The same, returning what is wrong instead of throwing (verify).
    std::string try_read_page(uint64_t index, std::span<std::byte> out, uint64_t& where) const;

private:
    [[noreturn]] void fail(const char* check, const std::string& structure, uint64_t offset,
                           const std::string& msg) const;

    // The descriptors around the last one read, and the last page read
    // (its descriptor's offset, size and flags, and its bytes).
    struct ReadCache {
        std::mutex mutex;
        uint64_t first = 0;
        std::vector<PageDesc> descs;
        PageDesc last{};
        bool have_last = false;
        std::vector<std::byte> page;
    };

    std::shared_ptr<const reader::DumpFile> file_;
    std::unique_ptr<ReadCache> cache_ = std::make_unique<ReadCache>();
    DiskDumpHeader header_{};
    KdumpSubHeader sub_{};
    uint64_t max_mapnr_ = 0;
    uint64_t bitmap_offset_ = 0, bitmap_size_ = 0, desc_offset_ = 0;
    BitmapOnDisk bitmap1_, bitmap2_;
    reader::NoteList notes_;
};

}  // namespace xendump::kdump
