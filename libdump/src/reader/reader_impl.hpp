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
#include "xendump/reader.hpp"

namespace xendump {

namespace kdump {
class KdumpFile;
}

struct DumpReader::Impl {
    std::filesystem::path path;
    std::shared_ptr<const reader::DumpFile> file;
    FileFormat format = FileFormat::v1;
    reader::ElfLayout elf;
    std::shared_ptr<const kdump::KdumpFile> kdump;  // FileFormat::kdump
    // kdump: the descriptor slot of each entry, when it is not the entry's
    // index (a PV guest's pages are filed by machine frame).
    std::vector<uint64_t> kdump_slot;
    uint64_t kdump_desc(uint64_t entry) const { return kdump_slot.empty() ? entry : kdump_slot[entry]; }

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

    // The PFN->GMFN table: descriptor location and the entries it holds
    // (xen_elf: trailing ~0 entries dropped).
    std::shared_ptr<const reader::EntryTable> entries;
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

    mutable std::once_flag gmfn_once;
    mutable std::vector<uint64_t> by_gmfn;  // entry indices sorted by gmfn (PV)

    const std::vector<uint64_t>& gmfn_order() const;
    std::string file_name() const { return path.string(); }
};

namespace reader {
std::vector<Finding> run_checks(const DumpReader::Impl& d, const VerifyOptions& options);
std::vector<Finding> check_digests(const DumpReader::Impl& d, const VerifyOptions& options);
// The checks of a compact (kdump) file, digests included when asked.
std::vector<Finding> check_kdump(const DumpReader::Impl& d, const VerifyOptions& options);
// The "digests-absent" finding for a file without a digest note.
Finding digests_absent(const DumpReader::Impl& d);
}  // namespace reader

}  // namespace xendump
