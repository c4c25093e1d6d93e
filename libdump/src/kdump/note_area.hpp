// The kdump file's ELF note area: every note of the v1 format
// (xen-dump-core(5) "Notes", "The PFN->GMFN table", "Trailer notes"), so a
// compact dump knows all a v1 file knows. It is written after the pages,
// when the unreadable pages, the digests and what the pass found in the
// guest (VMCOREINFO, KERNEL= keys) are known; the sub header points at it.
//
// Order: notes 1-10 as in a v1 note segment (VMCOREINFO at note 7's place),
// NT_XEN_P2M for PV guests only (an HVM or PVH guest's table is the bitmap:
// gmfn = pfn), NT_XEN_UNREADABLE when a page could not be read, and
// NT_XEN_DIGEST last: the chunk digests of the uncompressed pages in pfn
// order, the digest of every note before it, and the digest of the table as
// a v1 file stores it ({pfn, gmfn} pairs, gmfn = pfn for HVM and PVH), so a
// v1 file and a compact file of the same pages have the same page digests.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "pipeline/found_notes.hpp"
#include "xendump/dump_spec.hpp"
#include "xendump/page_source.hpp"
#include "xendump/writer.hpp"

namespace xendump::kdump {

struct NoteArea {
    std::vector<std::byte> bytes;
    uint64_t vmcoreinfo_offset = 0, vmcoreinfo_size = 0;  // the text, relative; size 0: none
    uint64_t digest_note_offset = 0;                       // relative; = bytes.size() without digests
};

// Refuses what no reader could use (no vcpu, bad context sizes).
void validate_spec(const DumpSpec& spec, std::span<const PageEntry> entries);

// `chunk_digests` null: written without digests.
NoteArea build_note_area(const DumpSpec& spec, std::span<const PageEntry> entries, const pipeline::FoundNotes* late,
                         std::span<const uint64_t> unreadable,
                         const std::vector<XXH128_canonical_t>* chunk_digests);

// Xen's XEN_ELFNOTE_CRASH_INFO ("Xen" note; xen/include/public/elfnote.h).
inline constexpr uint32_t kXenElfnoteCrashInfo = 0x1000001;

// A PV guest's shared_info.arch.pfn_to_mfn_frame_list_list (nullopt: none).
std::optional<uint64_t> p2m_frame_list_list(const DumpSpec& spec);

// The digest of the table as a v1 file stores it (gmfn = pfn unless PV).
XXH128_canonical_t table_digest(std::span<const PageEntry> entries, bool pv);

}  // namespace xendump::kdump
