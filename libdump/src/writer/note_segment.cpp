#include "writer/note_segment.hpp"

#include <string>

#include "elfcore/header_notes.hpp"
#include "writer/plan.hpp"

namespace xendump::writer {

using elfcore::NoteBuffer;
using elfcore::add_header_notes;
using elfcore::domain_keys;
using elfcore::note_header_size;
using elfcore::vcpu_slots;

NoteSegment note_segment(const DumpSpec& spec, uint64_t n, bool kernel_room, size_t keys_room) {
    NoteSegment seg;
    NoteBuffer& notes = seg.notes;
    seg.note_xen_size = add_header_notes(notes, spec, n);  // notes 1-4: .note.Xen
    KeyValues domain = domain_keys(spec, n);
    std::string domain_text = domain.serialize();
    domain_text.push_back('\0');  // C-string readers; the padding adds more NULs
    // Room for late keys: more NULs, which every reader already ignores.
    domain_text.resize(domain_text.size() + (kernel_room ? kKernelKeysRoom : 0) + keys_room, '\0');
    seg.domain_desc_offset =
        notes.add(format::kNameXenCore, format::kNtXenDomain, std::as_bytes(std::span(domain_text)));
    seg.domain_desc_size = notes.size() - seg.domain_desc_offset;
    seg.domain = std::move(domain);
    if (spec.vmcoreinfo) {
        notes.add(format::kNameVmcoreinfo, format::kNtVmcoreinfo, std::as_bytes(std::span(*spec.vmcoreinfo)));
    } else if (kernel_room) {
        seg.vmcoreinfo_room_offset = notes.size();
        const std::vector<std::byte> zeros(vmcoreinfo_room_size() - note_header_size(format::kNameXenCore));
        notes.add(format::kNameXenCore, format::kNtXenPadding, zeros);
        seg.vmcoreinfo_room_size = notes.size() - seg.vmcoreinfo_room_offset;
    }
    for (const auto& p : spec.prstatus) notes.add(format::kNameCore, format::kNtPrstatus, p);

    // Note 9: fixed 5168-byte slots; a 32-bit context fills the slot's start.
    const std::vector<std::byte> slots = vcpu_slots(spec);
    seg.prstatus_desc = notes.add(format::kNameXenCore, format::kNtXenPrstatus, slots);
    seg.prstatus_size = slots.size();
    if (spec.shared_info)
        seg.shared_info_desc = notes.add(format::kNameXenCore, format::kNtXenSharedInfo, *spec.shared_info);
    return seg;
}

}  // namespace xendump::writer
