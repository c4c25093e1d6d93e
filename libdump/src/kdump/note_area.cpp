#include "kdump/note_area.hpp"

#include <string>

#include "elfcore/crash_info.hpp"
#include "elfcore/header_notes.hpp"
#include "elfcore/input_check.hpp"
#include "elfcore/notes.hpp"
#include "elfcore/p2m_table.hpp"
#include "stream_hash.hpp"
#include "xendump/error.hpp"

namespace xendump::kdump {

using elfcore::bytes_of;

void validate_spec(const DumpSpec& spec, const PageSource& entries) { elfcore::check_input(spec, entries); }

namespace {

// Bytes written to the sink and hashed (the digest of the notes before NT_XEN_DIGEST).
struct HashedOut {
    explicit HashedOut(io::Sink& o) : out(o) {}
    io::Sink& out;
    StreamHash hash;
    uint64_t size = 0;
    void write(std::span<const std::byte> b) {
        out.write(b);
        hash.update(b.data(), b.size());
        size += b.size();
    }
};

}  // namespace

const std::optional<std::string>& note_vmcoreinfo(const DumpSpec& spec, const pipeline::FoundNotes* late) {
    return spec.vmcoreinfo || !late ? spec.vmcoreinfo : late->vmcoreinfo;
}

NoteArea write_note_area(io::Sink& out, const DumpSpec& spec, const PageSource& entries,
                         const pipeline::FoundNotes* late, std::span<const uint64_t> unreadable,
                         elfcore::DigestTable* chunk_digests, const HeadNote* head) {
    validate_spec(spec, entries);
    const bool pv = spec.type == format::GuestType::pv;
    const uint64_t n = entries.nr_entries();
    NoteArea area;
    elfcore::NoteBuffer notes;
    elfcore::add_header_notes(notes, spec, n);
    KeyValues domain = elfcore::domain_keys(spec, n);
    if (late)
        for (const auto& [k, v] : late->domain.items()) domain.set(k, v);
    area.domain = domain;
    std::string text = domain.serialize();
    text.push_back('\0');
    notes.add(format::kNameXenCore, format::kNtXenDomain, std::as_bytes(std::span(text)));

    const std::optional<std::string>& vmcoreinfo = note_vmcoreinfo(spec, late);
    if (vmcoreinfo) {
        area.vmcoreinfo_offset = notes.add(format::kNameVmcoreinfo, format::kNtVmcoreinfo, std::as_bytes(std::span(*vmcoreinfo)));
        area.vmcoreinfo = *vmcoreinfo;
    }
    for (const auto& p : spec.prstatus) notes.add(format::kNameCore, format::kNtPrstatus, p);
    notes.add(format::kNameXenCore, format::kNtXenPrstatus, elfcore::vcpu_slots(spec));
    if (spec.shared_info) notes.add(format::kNameXenCore, format::kNtXenSharedInfo, *spec.shared_info);

    HashedOut w(out);
    w.write(notes.bytes());
    // NT_XEN_P2M (PV): the table as it is, a window at a time; its digest
    // is of the table as a v1 file stores it (gmfn = pfn unless PV).
    StreamHash table;
    if (pv) {
        const uint64_t size = n * sizeof(PageEntry);  // 16 bytes an entry: the next note stays 8-aligned
        if (elfcore::note_padded_desc_size(format::kNameXenCore, size) != size)
            throw Error("internal error: NT_XEN_P2M would need padding");
        w.write(elfcore::note_header(format::kNameXenCore, format::kNtXenP2m, size));
    }
    elfcore::for_each_table_window(entries, !pv, [&](std::span<const PageEntry> window) {
        if (pv) w.write(std::as_bytes(window));
        table.update(window.data(), window.size_bytes());
    });

    elfcore::NoteBuffer rest;
    if (pv) {
        // crash's Xen kdump support (a dom0's kdump file): it takes the last
        // word of XEN_ELFNOTE_CRASH_INFO for the mfn of the frame-list list
        // of the p2m, the guest's own, and translates pseudo-physical
        // addresses through it into the file's machine frames.
        if (auto list = elfcore::p2m_frame_list_list(spec)) {
            const uint64_t info[3] = {spec.xen_version.major_version, spec.xen_version.minor_version, *list};
            rest.add(format::kNameXen, elfcore::kXenElfnoteCrashInfo, std::as_bytes(std::span(info)));
        }
    }
    if (!unreadable.empty()) {
        std::vector<uint64_t> desc;
        desc.reserve(unreadable.size() + 1);
        desc.push_back(unreadable.size());
        desc.insert(desc.end(), unreadable.begin(), unreadable.end());
        rest.add(format::kNameXenCore, format::kNtXenUnreadable, std::as_bytes(std::span(desc)));
    }
    if (head) rest.add(format::kNameXenCore, format::kNtXenKdumpHead, bytes_of(*head));
    w.write(rest.bytes());
    area.size = w.size;
    if (chunk_digests)
        area.size += elfcore::write_digest_note(out, *chunk_digests, w.hash.finish_and_reset(), table.finish_and_reset());
    return area;
}

}  // namespace xendump::kdump
