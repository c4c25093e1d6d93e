#include "kdump/note_area.hpp"

#include <cstring>
#include <string>

#include "p2m/p2m_walk.hpp"
#include "stream_hash.hpp"
#include "writer/header_notes.hpp"
#include "writer/input_check.hpp"
#include "writer/notes.hpp"
#include "writer/plan.hpp"
#include "xendump/error.hpp"

namespace xendump::kdump {

using writer::bytes_of;

void validate_spec(const DumpSpec& spec, std::span<const PageEntry> entries) { writer::check_input(spec, entries); }

std::optional<uint64_t> p2m_frame_list_list(const DumpSpec& spec) {
    // A 32-bit crash reads 32-bit words there: only 64-bit guests get the note.
    if (spec.type != format::GuestType::pv || spec.guest_width != 8 || !spec.shared_info) return std::nullopt;
    const auto arch = p2m_detail::parse_arch_shared_info(*spec.shared_info, spec.guest_width);
    // 0: none published; ~0: a linear p2m only (SIF_VIRT_P2M_4TOOLS), no frame-list list.
    if (arch.frame_list_list == 0 || arch.frame_list_list == p2m_detail::kNoFrame) return std::nullopt;
    return arch.frame_list_list;
}

XXH128_canonical_t table_digest(std::span<const PageEntry> entries, bool pv) {
    if (pv) return writer::digest_of(std::as_bytes(entries));
    StreamHash h;
    constexpr size_t kPart = 4096;
    std::vector<PageEntry> part;
    for (size_t i = 0; i < entries.size(); i += kPart) {
        part.clear();
        for (size_t j = i; j < std::min(entries.size(), i + kPart); ++j) part.push_back({entries[j].pfn, entries[j].pfn});
        h.update(part.data(), part.size() * sizeof(PageEntry));
    }
    return h.finish_and_reset();
}

NoteArea build_note_area(const DumpSpec& spec, std::span<const PageEntry> entries, const pipeline::FoundNotes* late,
                         std::span<const uint64_t> unreadable,
                         const std::vector<XXH128_canonical_t>* chunk_digests) {
    validate_spec(spec, entries);
    const bool pv = spec.type == format::GuestType::pv;
    const uint64_t n = entries.size();
    NoteArea area;
    writer::NoteBuffer notes;
    writer::add_header_notes(notes, spec, n);
    KeyValues domain = writer::domain_keys(spec, n);
    if (late)
        for (const auto& [k, v] : late->domain.items()) domain.set(k, v);
    std::string text = domain.serialize();
    text.push_back('\0');
    notes.add(format::kNameXenCore, format::kNtXenDomain, std::as_bytes(std::span(text)));

    const std::optional<std::string>& vmcoreinfo = spec.vmcoreinfo ? spec.vmcoreinfo : late ? late->vmcoreinfo : spec.vmcoreinfo;
    if (vmcoreinfo) {
        area.vmcoreinfo_offset = notes.add(format::kNameVmcoreinfo, format::kNtVmcoreinfo, std::as_bytes(std::span(*vmcoreinfo)));
        area.vmcoreinfo_size = vmcoreinfo->size();
    }
    for (const auto& p : spec.prstatus) notes.add(format::kNameCore, format::kNtPrstatus, p);
    notes.add(format::kNameXenCore, format::kNtXenPrstatus, writer::vcpu_slots(spec));
    if (spec.shared_info) notes.add(format::kNameXenCore, format::kNtXenSharedInfo, *spec.shared_info);
    if (pv) {
        notes.add(format::kNameXenCore, format::kNtXenP2m, std::as_bytes(entries));
        // crash's Xen kdump support (a dom0's kdump file): it takes the last
        // word of XEN_ELFNOTE_CRASH_INFO for the mfn of the frame-list list
        // of the p2m, the guest's own, and translates pseudo-physical
        // addresses through it into the file's machine frames.
        if (auto list = p2m_frame_list_list(spec)) {
            const uint64_t info[3] = {spec.xen_version.major_version, spec.xen_version.minor_version, *list};
            notes.add(format::kNameXen, kXenElfnoteCrashInfo, std::as_bytes(std::span(info)));
        }
    }
    if (!unreadable.empty()) {
        std::vector<uint64_t> desc;
        desc.reserve(unreadable.size() + 1);
        desc.push_back(unreadable.size());
        desc.insert(desc.end(), unreadable.begin(), unreadable.end());
        notes.add(format::kNameXenCore, format::kNtXenUnreadable, std::as_bytes(std::span(desc)));
    }
    area.digest_note_offset = notes.size();
    if (chunk_digests) {
        std::vector<std::byte> desc(sizeof(format::DigestDescHead));
        const format::DigestDescHead head{format::kDigestXxh3_128, format::kDigestChunkPages};
        std::memcpy(desc.data(), &head, sizeof head);
        auto add = [&desc](const XXH128_canonical_t& d) {
            auto b = bytes_of(d);
            desc.insert(desc.end(), b.begin(), b.end());
        };
        for (const auto& d : *chunk_digests) add(d);
        add(writer::digest_of(notes.bytes()));
        add(table_digest(entries, pv));
        notes.add(format::kNameXenCore, format::kNtXenDigest, desc);
    }
    area.bytes = notes.bytes();
    return area;
}

}  // namespace xendump::kdump
