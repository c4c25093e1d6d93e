// The v1 section header table and its string table (xen-dump-core(5) "Sections"), in the order
// of the table: NULL, .shstrtab, .note.Xen, .xen_prstatus, .xen_shared_info,
// .xen_pages, .note.xen_p2m, .xen_p2m or .xen_pfn, .note.xen_trailer.
#pragma once

#include <cstdint>
#include <vector>

#include "writer/note_segment.hpp"
#include "writer/plan.hpp"

namespace xendump::writer {

struct SectionTable {
    std::vector<std::byte> shstrtab;
    std::vector<std::byte> shdrs;
    uint64_t count = 0;
};

// `trailer_size`: NT_XEN_DIGEST and the unreadable area; `shstrtab_offset`
// where the string table goes (it follows the trailer).
SectionTable section_table(const DumpSpec& spec, const Layout& layout, const NoteSegment& notes,
                           uint64_t trailer_size, uint64_t shstrtab_offset);


}  // namespace xendump::writer
