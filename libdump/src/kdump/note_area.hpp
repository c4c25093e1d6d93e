// The kdump file's ELF note area: every note of the v1 format
// (xen-dump-core(5) "Notes", "The PFN->GMFN table", "Trailer notes"), so a
// compact dump knows all a v1 file knows. It is written after the pages,
// when the unreadable pages, the digests and what the pass found in the
// guest (VMCOREINFO, KERNEL= keys) are known; the sub header points at it.
//
// Order: notes 1-10 as in a v1 note segment (VMCOREINFO at note 7's place),
// NT_XEN_P2M for PV guests only (an HVM or PVH guest's table is the bitmap:
// gmfn = pfn), NT_XEN_UNREADABLE when a page could not be read,
// NT_XEN_KDUMP_HEAD (what the headers hold that no other note says), and
// NT_XEN_DIGEST last: the chunk digests of the uncompressed pages in pfn
// order, the digest of every note before it, and the digest of the table as
// a v1 file stores it ({pfn, gmfn} pairs, gmfn = pfn for HVM and PVH), so a
// v1 file and a compact file of the same pages have the same page digests.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include "elfcore/digest_table.hpp"
#include "io/sink.hpp"
#include "kdump/heads.hpp"
#include "pipeline/found_notes.hpp"
#include "xendump/dump_spec.hpp"
#include "xendump/page_source.hpp"
#include "xendump/writer.hpp"

namespace xendump::kdump {

// What write_note_area wrote (offsets relative to its start).
struct NoteArea {
    uint64_t size = 0;
    std::optional<std::string> vmcoreinfo;  // the VMCOREINFO note's text, if any
    uint64_t vmcoreinfo_offset = 0;
    KeyValues domain;  // NT_XEN_DOMAIN's keys, as written
};

// The VMCOREINFO text the note area holds: the spec's, else the one the
// pass found (`late`, may be null).
const std::optional<std::string>& note_vmcoreinfo(const DumpSpec& spec, const pipeline::FoundNotes* late);

// Refuses what no reader could use (no vcpu, bad context sizes, pfns out of
// order), reading the entries a window at a time.
void validate_spec(const DumpSpec& spec, const PageSource& entries);

// Writes the note area at out's offset, in one pass: the notes before the
// table, NT_XEN_P2M's descriptor a window of `entries` at a time (PV), the
// rest; the notes' and the table's digests are hashed as they go.
// NT_XEN_DIGEST's chunk digests are copied from `chunk_digests` (a window
// at a time); null: written without digests. `head`, when given, is
// written as NT_XEN_KDUMP_HEAD (kdump/heads.hpp) just before NT_XEN_DIGEST,
// so the note area's digest covers it.
NoteArea write_note_area(io::Sink& out, const DumpSpec& spec, const PageSource& entries,
                         const pipeline::FoundNotes* late, std::span<const uint64_t> unreadable,
                         elfcore::DigestTable* chunk_digests, const HeadNote* head = nullptr);

}  // namespace xendump::kdump
