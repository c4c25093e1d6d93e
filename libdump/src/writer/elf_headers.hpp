// The v1 ELF header (xen-dump-core(5) "ELF header") and program header
// table ("Program headers"): PT_NOTE over
// the note segment, one PT_LOAD per run of consecutive pfns, and zeros for
// the kernel image segment's room; for PV guests also makedumpfile's table
// ("makedumpfile's view"), by machine frame.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "writer/plan.hpp"

namespace xendump::writer {

// The 64-byte ELF header; `shnum` sections, program headers at `phoff`.
std::vector<std::byte> elf_header(const DumpSpec& spec, const Layout& layout, uint64_t phoff, uint64_t shoff,
                                  uint64_t shnum);

// The program header table, `size` bytes (room after the runs stays zeros).
std::vector<std::byte> program_headers(const PageSource& source, const Layout& layout, uint64_t size);

// makedumpfile's view of a 64-bit PV guest (xen-dump-core(5) "makedumpfile's view").
// makedumpfile reads the program header table from offset 64 whatever e_phoff
// says (elf_info.c get_elf64_phdr), so a PV file also holds, there, a table
// of e_phnum entries that makedumpfile alone reads: the pages by machine
// address, as in a Xen host's kdump, plus XEN_ELFNOTE_CRASH_INFO naming the
// guest's pfn_to_mfn_frame_list_list, through which makedumpfile translates.
struct MachineView {
    uint64_t loads = 0;            // runs of pages next to each other in the file and in mfn
    std::vector<std::byte> note;   // the XEN_ELFNOTE_CRASH_INFO note, after the note segment
    uint64_t entries() const { return 1 + loads; }
};

// The view for a PV guest of width 8 whose shared_info names a frame list
// list; nullopt otherwise (HVM, PVH, 32-bit PV, no shared_info, none published).
std::optional<MachineView> machine_view(const DumpSpec& spec, const PageSource& source);

// makedumpfile's table, `size` bytes: PT_NOTE over the note segment and the
// crash info note, one PT_LOAD per machine run, then zeros (PT_NULL).
std::vector<std::byte> machine_view_headers(const PageSource& source, const Layout& layout, const MachineView& view,
                                            uint64_t size);

}  // namespace xendump::writer
