#include "writer/note_segment.hpp"

#include <cstring>
#include <string>

#include "writer/plan.hpp"

namespace xendump::writer {

NoteSegment note_segment(const DumpSpec& spec, uint64_t n, bool kernel_room) {
    NoteSegment seg;
    NoteBuffer& notes = seg.notes;
    const format::HeaderDesc hdr{spec.magic(), spec.vcpus.size(), n, format::kPageSize};
    notes.add(format::kNameXen, format::kNoteDumpcoreNone, {});
    notes.add(format::kNameXen, format::kNoteDumpcoreHeader, bytes_of(hdr));
    notes.add(format::kNameXen, format::kNoteDumpcoreXenVersion, bytes_of(spec.xen_version));
    const uint64_t format_version = format::kDumpcoreFormatVersion;
    notes.add(format::kNameXen, format::kNoteDumpcoreFormatVersion, bytes_of(format_version));
    seg.note_xen_size = notes.size();
    notes.add(format::kNameXenCore, format::kNtXenHeader, bytes_of(hdr));

    KeyValues domain = spec.domain;
    domain.set(keys::kNrPages, std::to_string(n));
    std::string vcpu_ids;
    for (const auto& v : spec.vcpus) {
        if (!vcpu_ids.empty()) vcpu_ids += ',';
        vcpu_ids += std::to_string(v.id);
    }
    domain.set(keys::kVcpus, vcpu_ids);
    std::string domain_text = domain.serialize();
    domain_text.push_back('\0');  // C-string readers; the padding adds more NULs
    // Room for late keys: more NULs, which every reader already ignores.
    if (kernel_room) domain_text.resize(domain_text.size() + kKernelKeysRoom, '\0');
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
    std::vector<std::byte> slots(spec.vcpus.size() * format::kVcpuSlotSize);
    for (size_t k = 0; k < spec.vcpus.size(); ++k)
        std::memcpy(slots.data() + k * format::kVcpuSlotSize, spec.vcpus[k].bytes.data(),
                    spec.vcpus[k].bytes.size());
    seg.prstatus_desc = notes.add(format::kNameXenCore, format::kNtXenPrstatus, slots);
    seg.prstatus_size = slots.size();
    if (spec.shared_info)
        seg.shared_info_desc = notes.add(format::kNameXenCore, format::kNtXenSharedInfo, *spec.shared_info);
    return seg;
}

}  // namespace xendump::writer
