// The v1 note segment (xen-dump-core(5) "Notes"), in the order of the notes: .note.Xen (notes
// 1-4), the header, NT_XEN_DOMAIN, VMCOREINFO or the room kept for it,
// NT_PRSTATUS, the vcpu context slots, shared_info; with the offsets inside
// the segment that the section table and the late notes need.
#pragma once

#include <cstdint>
#include <vector>

#include "elfcore/notes.hpp"
#include "xendump/dump_spec.hpp"

namespace xendump::writer {

struct NoteSegment {
    elfcore::NoteBuffer notes;
    uint64_t note_xen_size = 0;                  // notes 1-4: .note.Xen
    KeyValues domain;                            // NT_XEN_DOMAIN as written (with NR_PAGES, VCPUS)
    uint64_t domain_desc_offset = 0, domain_desc_size = 0;
    uint64_t vmcoreinfo_room_offset = 0, vmcoreinfo_room_size = 0;  // 0 when no room
    uint64_t prstatus_desc = 0, prstatus_size = 0;  // .xen_prstatus
    uint64_t shared_info_desc = 0;                  // .xen_shared_info (when present)
};

// `keys_room`: NULs kept after NT_XEN_DOMAIN's text for keys known only
// after the pass (kKernelKeysRoom with kernel_room, plus this).
NoteSegment note_segment(const DumpSpec& spec, uint64_t nr_pages, bool kernel_room, size_t keys_room = 0);

}  // namespace xendump::writer
