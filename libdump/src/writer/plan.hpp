// Everything about a v1 file that is known before the first page is read:
// the offsets of every part (xen-dump-core(5) "Layout"), the bytes in front of the pages, the
// section header table and the digests of the note segment and the table.
#pragma once

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "xendump/dump_spec.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/page_source.hpp"

namespace xendump::writer {

// The room kept for the guest kernel's notes found during the pass
// (late_notes.hpp): a VMCOREINFO note of up to kMaxVmcoreinfoText bytes, and
// kKernelKeysRoom bytes of keys after the NT_XEN_DOMAIN text.
inline constexpr size_t kMaxVmcoreinfoText = 4096;  // Linux VMCOREINFO_BYTES (one page)
inline constexpr size_t kKernelKeysRoom = 128;      // "KERNEL=" + 64-byte release + KERNELOFFSET=
// LIVE=precopy, PAUSE_USEC=, LIVE_ROUNDS=, PAGES_RECOPIED=, LIVE_RESTARTS=
// (20-digit values at most).
inline constexpr size_t kLiveKeysRoom = 160;

// Offsets of every part of the file, computed before anything is written.
struct Layout {
    uint64_t phnum = 0;            // e_phnum's count: PT_NOTE + runs (PV with makedumpfile's view: the padded tables)
    uint64_t notes_offset = 0, notes_size = 0;
    uint64_t pages_offset = 0, pages_size = 0;
    uint64_t p2m_note_offset = 0, p2m_desc_offset = 0, p2m_desc_size = 0;
    uint64_t pfn_offset = 0, pfn_size = 0;  // HVM/PVH
    uint64_t trailer_offset = 0;            // trailer size depends on unreadable pages
};

// Streaming (xen-dump-core(5) "ELF header", "Trailer notes", "Layout"):
// e_shoff sits in the ELF header, written before any page, yet in "Layout"
// order the section header table follows the trailer,
// whose NT_XEN_UNREADABLE is only known after the last page. So the trailer's
// size is fixed in advance: after NT_XEN_DIGEST (fixed size) comes a reserved
// area large enough for NT_XEN_UNREADABLE listing every page (8 bytes a page,
// half the table's cost) plus one note header. At the end it holds the real
// NT_XEN_UNREADABLE (when a page was unreadable) followed by one
// kNtXenPadding note of zeros filling the rest; readers find the trailer
// through its section and skip the padding note. The zeros are a hole in a
// sparse file. So the whole layout, the file size and the section headers
// depend only on the input, and pipe and file output are the same bytes.
struct DumpPlan {
    Layout layout;
    uint64_t nr_runs = 0;
    std::vector<std::byte> head;  // [0, layout.pages_offset)
    bool p2m_gmfn_is_pfn = false;      // HVM/PVH: the table's gmfns are the pfns (for_each_table_window)
    std::vector<std::byte> p2m_note_header;
    uint64_t digest_note_size = 0;     // 0 without digests
    uint64_t unreadable_area_offset = 0, unreadable_area_size = 0;
    uint64_t shstrtab_offset = 0;
    std::vector<std::byte> shstrtab;
    uint64_t shdr_offset = 0;
    std::vector<std::byte> shdrs;
    uint64_t file_size = 0;
    uint64_t nr_chunks = 0;            // digest chunks over .xen_pages
    XXH128_canonical_t notes_digest{};
    XXH128_canonical_t p2m_digest{};

    // Room kept for the guest kernel's notes (plan_dump's kernel_room), as
    // offsets inside the note segment; sizes 0 when nothing was reserved.
    bool late_room = false;             // kernel_room was asked for
    KeyValues domain;                   // NT_XEN_DOMAIN as planned (with NR_PAGES, VCPUS)
    uint64_t domain_desc_offset = 0, domain_desc_size = 0;
    uint64_t vmcoreinfo_room_offset = 0, vmcoreinfo_room_size = 0;  // the whole padding note
    // The program header table (PT_NOTE, the runs, the kernel room) and its
    // offset: right after the ELF header, in `head`, for HVM/PVH; for PV at
    // the very end, after the section header table, so that crash opens the
    // file through its Xen reader (see program_headers_at_end()).
    uint64_t phdr_offset = 0;
    std::vector<std::byte> phdrs;  // only when at the end; else part of `head`
    // Room for one more program header after the last PT_LOAD (zeros, not
    // counted in e_phnum until a kernel image segment is written there);
    // 0 when none was kept (no reservation, 32-bit guest, PN_XNUM files).
    uint64_t kernel_phdr_offset = 0;

    // PV: makedumpfile's table at offset 64 (elf_headers.hpp MachineView);
    // e_phnum is then fixed, the kernel image segment fills a PT_NULL.
    bool machine_view = false;

    bool phdrs_at_end() const { return phdr_offset > layout.pages_offset; }

    std::span<const std::byte> note_bytes() const {
        return std::span(head).subspan(layout.notes_offset, layout.notes_size);
    }
};

XXH128_canonical_t digest_of(std::span<const std::byte> bytes);

// Bytes of the reserved room at note 7's place: a VMCOREINFO note of
// kMaxVmcoreinfoText bytes and the header of the padding note after it.
uint64_t vmcoreinfo_room_size();

// Where the program headers go for a guest of this type (xen-dump-core(5) "ELF header" as
// xen-dump-core(5) amends it): at the end of the file for a PV guest. crash
// takes a file whose program header table starts within its first bytes
// through its ELF (netdump) reader, which cannot follow a PV guest's page
// tables (they hold machine frame numbers); a table further in sends crash to
// its Xen dump reader, which translates through .xen_p2m. Every other ELF
// reader goes by e_phoff wherever it points.
bool program_headers_at_end(format::GuestType type);

// Validates the input (input_check.hpp) and computes the plan: the note
// segment (note_segment.hpp), the offsets, the section header table
// (section_table.hpp), the ELF and program headers (elf_headers.hpp).
// `kernel_room`: keep room for the guest kernel's notes (late_notes.hpp).
// The entries are read from `source` a window at a time (nr_entries(),
// read_entries()), a few passes over them: the plan holds the program
// headers (56 bytes a run of consecutive pfns) and nothing per page.
// `keys_room`: room for more late keys in NT_XEN_DOMAIN (a live dump's
// pre-copy keys, known after the pass); the late keys are then written.
DumpPlan plan_dump(const DumpSpec& spec, const PageSource& source, bool digests, bool kernel_room,
                   size_t keys_room = 0);

// Size of the unreadable area reserved for `nr_pages` pages.
uint64_t unreadable_area_size(uint64_t nr_pages);

}  // namespace xendump::writer
