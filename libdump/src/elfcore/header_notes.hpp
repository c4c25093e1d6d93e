// What the v1 note segment (writer/note_segment.cpp) and the compact file's note
// area (kdump/note_area.cpp) both start with (xen-dump-core(5) "Notes"): notes 1-5, the
// NT_XEN_DOMAIN keys the writer adds, and note 9's vcpu slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "elfcore/notes.hpp"
#include "xendump/dump_spec.hpp"

namespace xendump::elfcore {

// Notes 1-5 for `nr_pages` pages; returns the size of notes 1-4 (.note.Xen).
uint64_t add_header_notes(NoteBuffer& notes, const DumpSpec& spec, uint64_t nr_pages);
// spec.domain with NR_PAGES and VCPUS set.
KeyValues domain_keys(const DumpSpec& spec, uint64_t nr_pages);
// Note 9's descriptor: fixed 5168-byte slots; a 32-bit context fills the slot's start.
std::vector<std::byte> vcpu_slots(const DumpSpec& spec);

}  // namespace xendump::elfcore
