// Reading a kdump file (kdump/format.hpp) from an untrusted file: every
// offset, size and count is checked against the file before it is used,
// and every failure names the file and the offset of the structure.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kdump/format.hpp"
#include "reader/dump_file.hpp"
#include "reader/entry_table.hpp"
#include "reader/notes.hpp"

namespace xendump::kdump {

class KdumpFile {
public:
    // True when the file starts with the "KDUMP   " signature.
    static bool has_signature(const reader::DumpFile& file);

    // Parses the header, sub header, bitmaps and note area. Throws
    // reader::CheckError when the file cannot be used.
    explicit KdumpFile(std::shared_ptr<const reader::DumpFile> file);

    const reader::DumpFile& file() const { return *file_; }
    const DiskDumpHeader& header() const { return header_; }
    const KdumpSubHeader& sub_header() const { return sub_; }
    uint64_t max_mapnr() const { return max_mapnr_; }
    uint64_t bitmap_offset() const { return bitmap_offset_; }
    uint64_t bitmap_size() const { return bitmap_size_; }  // of each
    uint64_t desc_offset() const { return desc_offset_; }
    const std::vector<std::byte>& present_bitmap() const { return bitmap1_; }
    const std::vector<std::byte>& stored_bitmap() const { return bitmap2_; }
    // The stored pages' pfns, ascending (gmfn = pfn: the caller puts the PV
    // table's gmfns in).
    const std::shared_ptr<reader::EntryTable>& entries() const { return entries_; }
    const reader::NoteList& notes() const { return notes_; }

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

    std::shared_ptr<const reader::DumpFile> file_;
    DiskDumpHeader header_{};
    KdumpSubHeader sub_{};
    uint64_t max_mapnr_ = 0;
    uint64_t bitmap_offset_ = 0, bitmap_size_ = 0, desc_offset_ = 0;
    std::vector<std::byte> bitmap1_, bitmap2_;
    std::shared_ptr<reader::EntryTable> entries_;
    reader::NoteList notes_;
};

}  // namespace xendump::kdump
