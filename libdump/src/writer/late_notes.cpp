#include "writer/late_notes.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "elfcore/notes.hpp"

namespace xendump::writer {

using elfcore::NoteBuffer;
using elfcore::note_header;
using elfcore::note_header_size;

namespace {

void put(std::vector<std::byte>& out, uint64_t at, std::span<const std::byte> bytes) {
    std::memcpy(out.data() + at, bytes.data(), bytes.size());
}

// The new NT_XEN_DOMAIN text, NUL-padded to the planned descriptor size, or
// nullopt when the keys change nothing or do not fit.
std::optional<std::vector<std::byte>> domain_desc(const DumpPlan& plan, const KeyValues& late) {
    if (late.items().empty()) return std::nullopt;
    KeyValues domain = plan.domain;
    for (const auto& [k, v] : late.items()) domain.set(k, v);
    const std::string text = domain.serialize();
    // Keep at least one NUL after the text for C-string readers.
    if (text.size() + 1 > plan.domain_desc_size) return std::nullopt;
    std::vector<std::byte> desc(plan.domain_desc_size);
    std::memcpy(desc.data(), text.data(), text.size());
    return desc;
}

// The VMCOREINFO note then one padding note, exactly filling the room.
std::optional<std::vector<std::byte>> vmcoreinfo_room(const DumpPlan& plan, const std::string& text) {
    if (text.empty() || text.size() > kMaxVmcoreinfoText) return std::nullopt;
    NoteBuffer notes;
    notes.add(format::kNameVmcoreinfo, format::kNtVmcoreinfo, std::as_bytes(std::span(text)));
    const uint64_t pad_header = note_header_size(format::kNameXenCore);
    const uint64_t pad_desc = plan.vmcoreinfo_room_size - notes.size() - pad_header;
    std::vector<std::byte> out = notes.bytes();
    auto header = note_header(format::kNameXenCore, format::kNtXenPadding, pad_desc);
    out.insert(out.end(), header.begin(), header.end());
    out.resize(plan.vmcoreinfo_room_size);
    return out;
}

}  // namespace

std::optional<PatchedNotes> patch_notes(const DumpPlan& plan, const pipeline::FoundNotes& late) {
    if (!plan.late_room) return std::nullopt;
    const auto original = plan.note_bytes();
    PatchedNotes out;
    out.bytes.assign(original.begin(), original.end());
    if (plan.vmcoreinfo_room_size && late.vmcoreinfo) {
        if (auto room = vmcoreinfo_room(plan, *late.vmcoreinfo)) {
            put(out.bytes, plan.vmcoreinfo_room_offset, *room);
            out.vmcoreinfo = true;
        }
    }
    if (auto desc = domain_desc(plan, late.domain)) {
        put(out.bytes, plan.domain_desc_offset, *desc);
        out.domain_keys = true;
    }
    if (!out.vmcoreinfo && !out.domain_keys) return std::nullopt;
    return out;
}

}  // namespace xendump::writer
