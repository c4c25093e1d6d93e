#include "elfcore/header_notes.hpp"

#include <cstring>
#include <string>

namespace xendump::elfcore {

uint64_t add_header_notes(NoteBuffer& notes, const DumpSpec& spec, uint64_t nr_pages) {
    const format::HeaderDesc hdr{spec.magic(), spec.vcpus.size(), nr_pages, format::kPageSize};
    notes.add(format::kNameXen, format::kNoteDumpcoreNone, {});
    notes.add(format::kNameXen, format::kNoteDumpcoreHeader, bytes_of(hdr));
    notes.add(format::kNameXen, format::kNoteDumpcoreXenVersion, bytes_of(spec.xen_version));
    const uint64_t format_version = format::kDumpcoreFormatVersion;
    notes.add(format::kNameXen, format::kNoteDumpcoreFormatVersion, bytes_of(format_version));
    const uint64_t note_xen_size = notes.size();
    notes.add(format::kNameXenCore, format::kNtXenHeader, bytes_of(hdr));
    return note_xen_size;
}

KeyValues domain_keys(const DumpSpec& spec, uint64_t nr_pages) {
    KeyValues domain = spec.domain;
    domain.set(keys::kNrPages, std::to_string(nr_pages));
    std::string vcpu_ids;
    for (const auto& v : spec.vcpus) {
        if (!vcpu_ids.empty()) vcpu_ids += ',';
        vcpu_ids += std::to_string(v.id);
    }
    domain.set(keys::kVcpus, vcpu_ids);
    return domain;
}

std::vector<std::byte> vcpu_slots(const DumpSpec& spec) {
    std::vector<std::byte> slots(spec.vcpus.size() * format::kVcpuSlotSize);
    for (size_t k = 0; k < spec.vcpus.size(); ++k)
        std::memcpy(slots.data() + k * format::kVcpuSlotSize, spec.vcpus[k].bytes.data(), spec.vcpus[k].bytes.size());
    return slots;
}

}  // namespace xendump::elfcore
