// DumpReader's state, shared by the files that implement open, lookups,
// verify and the page source. Everything here was bounds-checked at open.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "reader/dump_file.hpp"
#include "reader/elf_layout.hpp"
#include "reader/entry_table.hpp"
#include "reader/notes.hpp"
#include "reader/table_on_disk.hpp"
#include "xendump/reader.hpp"

namespace xendump {

namespace kdump {
class KdumpFile;
}

// Hidden: DumpReader declares it in the public header (so it would be
// exported with DumpReader), but it is the reader's inside. clang refuses a
// visibility that differs from the declaration's; its builds (the fuzz
// targets) are not shipped, and the exports test runs on GCC's build.
#if defined(__clang__)
#define XENDUMP_READER_IMPL_VISIBILITY
#else
#define XENDUMP_READER_IMPL_VISIBILITY __attribute__((visibility("hidden")))
#endif
struct XENDUMP_READER_IMPL_VISIBILITY DumpReader::Impl {
    // DumpReader::open of `file`, opened already (a member: the reader's
    // constructor is private): for the library's own bytes (DumpFile's
    // RandomAccess constructor). Not flattened, not encrypted.
    static DumpReader open_file(std::shared_ptr<const reader::DumpFile> file);

    std::filesystem::path path;
    std::shared_ptr<const reader::DumpFile> file;
    FileFormat format = FileFormat::v1;
    reader::ElfLayout elf;
    std::shared_ptr<const kdump::KdumpFile> kdump;  // FileFormat::kdump
    // kdump: the descriptor of entry `index` (its gmfn `gmfn`): the index,
    // or for a PV guest, whose pages are filed by machine frame, the rank of
    // the gmfn in the 2nd bitmap.
    uint64_t kdump_desc(uint64_t index, uint64_t gmfn) const;

    // Notes of the note segment (v1: the PT_NOTE; xen_elf: .note.Xen).
    reader::NoteList notes;
    uint64_t notes_offset = 0, notes_size = 0;
    const reader::Segment* note_segment = nullptr;  // v1
    reader::NoteList trailer;                       // .note.xen_trailer (v1)

    format::HeaderDesc header{};
    format::XenVersionDesc xen_version{};
    KeyValues domain;
    format::GuestType type = format::GuestType::pv;
    unsigned guest_width = 8;

    // The PFN->GMFN table, read where it lies (xen_elf: trailing ~0 entries
    // dropped): open, lookups and verify stream it or go through a bounded
    // cache; only entries()/page_source() load it whole, on first use.
    reader::TableOnDisk table;
    uint64_t table_offset = 0, table_size = 0, table_entry_size = 16;
    uint64_t table_raw_count = 0;  // entries in the file, ~0 ones included
    std::string table_structure;
    std::vector<PageRun> runs;
    uint64_t pages_offset = 0, pages_size = 0;

    std::vector<VcpuContext> vcpus;
    std::optional<std::vector<std::byte>> shared_info;
    std::optional<std::string> vmcoreinfo;
    std::vector<uint64_t> unreadable;
    const reader::Note* digest = nullptr;  // in `trailer`

    std::vector<Finding> open_findings;  // problems found at open that did not stop it

    // Stretches of entries whose gmfns rise by one from entry to entry,
    // sorted by gmfn (PV): the gmfn index, built by one pass over the table
    // on first use. 32 bytes a stretch (a guest's frames come in long ones).
    struct GmfnExtent {
        uint64_t gmfn, index, count;
        uint64_t end_max;  // the highest gmfn + count of this and every extent before it
    };
    mutable std::once_flag gmfn_once;
    mutable std::vector<GmfnExtent> by_gmfn;
    const std::vector<GmfnExtent>& gmfn_extents() const;

    // The whole table in memory (16 bytes a page): for the span-returning
    // API only (entries(), page_source()).
    mutable std::once_flag all_once;
    mutable std::shared_ptr<const reader::EntryTable> all;
    const std::shared_ptr<const reader::EntryTable>& all_entries() const;

    uint64_t nr_entries() const { return table.size(); }
    // The pfn of entry `index` (< nr_entries()), through the runs.
    uint64_t pfn_of_index(uint64_t index) const;
    // The entry of `pfn`, through the runs.
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const;
    std::string file_name() const { return path.string(); }
};

namespace reader {
// The maximal runs of present pfns, from one pass over the table (v1 files
// whose PT_LOADs do not state them, xen_elf files; verify for every v1 file).
std::vector<PageRun> runs_of_table(const DumpReader::Impl& d);
std::vector<Finding> run_checks(const DumpReader::Impl& d, const VerifyOptions& options);
std::vector<Finding> check_digests(const DumpReader::Impl& d, const VerifyOptions& options);
// The checks of a compact (kdump) file, digests included when asked.
std::vector<Finding> check_kdump(const DumpReader::Impl& d, const VerifyOptions& options);
// The "digests-absent" finding for a file without a digest note.
Finding digests_absent(const DumpReader::Impl& d);
}  // namespace reader

}  // namespace xendump
