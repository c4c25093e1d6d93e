#include "writer/plan.hpp"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "elfcore/input_check.hpp"
#include "elfcore/notes.hpp"
#include "elfcore/p2m_table.hpp"
#include "elfcore/runs.hpp"
#include "stream_hash.hpp"
#include "util/util.hpp"
#include "writer/elf_headers.hpp"
#include "writer/note_segment.hpp"
#include "writer/section_table.hpp"
#include "xendump/error.hpp"

namespace xendump::writer {

using elfcore::align_up;
using elfcore::check_input;
using elfcore::count_runs;
using elfcore::for_each_table_window;
using elfcore::note_header;
using elfcore::note_header_size;
using elfcore::note_padded_desc_size;

namespace {

using util::kPage;
// A "XEN CORE" note header: 12 bytes plus the 9-byte name padded to 12.
const uint64_t kXenCoreHeader = note_header_size(format::kNameXenCore);

// xen-dump-core(5) "Layout": the offsets of the note segment, the pages, the table note and .xen_pfn,
// the trailer; the program header table precedes the notes unless it goes
// at the end (PV).
// `front`: the bytes between the ELF header and the notes (a program header
// table); `after_notes`: makedumpfile's crash info note (PV).
Layout layout_of(const DumpSpec& spec, uint64_t n, uint64_t phnum, uint64_t notes_size, uint64_t front,
                 uint64_t after_notes) {
    Layout L;
    L.phnum = phnum;
    L.notes_offset = sizeof(Elf64_Ehdr) + front;
    L.notes_size = notes_size;
    L.pages_offset = align_up(L.notes_offset + L.notes_size + after_notes, kPage);
    L.pages_size = n * kPage;
    // xen-dump-core(5) "The PFN->GMFN table": the table note's descriptor starts on a page boundary.
    L.p2m_desc_offset = align_up(L.pages_offset + L.pages_size + kXenCoreHeader, kPage);
    L.p2m_note_offset = L.p2m_desc_offset - kXenCoreHeader;
    L.p2m_desc_size = n * sizeof(PageEntry);
    const uint64_t after_p2m = L.p2m_desc_offset + L.p2m_desc_size;
    if (spec.type != format::GuestType::pv) {
        L.pfn_offset = after_p2m;
        L.pfn_size = n * sizeof(uint64_t);
    }
    L.trailer_offset = after_p2m + L.pfn_size;
    return L;
}

}  // namespace

XXH128_canonical_t digest_of(std::span<const std::byte> bytes) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), bytes.size()));
    return c;
}

uint64_t vmcoreinfo_room_size() {
    return note_header_size(format::kNameVmcoreinfo) +
           note_padded_desc_size(format::kNameVmcoreinfo, kMaxVmcoreinfoText) + kXenCoreHeader;
}

uint64_t unreadable_area_size(uint64_t nr_pages) {
    // NT_XEN_UNREADABLE for every page (count + pfns) plus room for the header
    // of the padding note that fills whatever is left (xen-dump-core(5) "Trailer notes").
    return kXenCoreHeader + 8 + 8 * nr_pages + kXenCoreHeader;
}

bool program_headers_at_end(format::GuestType type) { return type == format::GuestType::pv; }

DumpPlan plan_dump(const DumpSpec& spec, const PageSource& source, bool digests, bool kernel_room,
                   size_t keys_room) {
    check_input(spec, source);
    const uint64_t n = source.nr_entries();
    DumpPlan plan;
    const bool pv = spec.type == format::GuestType::pv;

    // xen-dump-core(5) "Program headers": one PT_LOAD per maximal run of
    // consecutive pfns; "Notes": the note segment.
    plan.nr_runs = count_runs(source);
    const uint64_t phnum = 1 + plan.nr_runs;
    NoteSegment seg = note_segment(spec, n, kernel_room, keys_room);
    plan.late_room = kernel_room || keys_room != 0;
    plan.domain = std::move(seg.domain);
    plan.domain_desc_offset = seg.domain_desc_offset;
    plan.domain_desc_size = seg.domain_desc_size;
    plan.vmcoreinfo_room_offset = seg.vmcoreinfo_room_offset;
    plan.vmcoreinfo_room_size = seg.vmcoreinfo_room_size;

    // xen-dump-core(5) "Layout". One program header of room after the PT_LOADs when the
    // guest kernel may be found (FoundNotes::kernel_image), whatever is found.
    const bool elf64_guest = !(pv && spec.guest_width == 4);
    const bool kernel_phdr_room = kernel_room && elf64_guest && phnum + 1 < PN_XNUM;
    uint64_t table_entries = phnum + (kernel_phdr_room ? 1 : 0);
    // xen-dump-core(5) "makedumpfile's view": for PV a second table at offset 64; both
    // tables have e_phnum entries, the shorter one ends in PT_NULLs, and
    // e_phnum counts the kernel image room from the start.
    const std::optional<MachineView> view = machine_view(spec, source);
    if (view) table_entries = std::max(table_entries, view->entries());
    plan.machine_view = view.has_value();
    const uint64_t phdrs_size = table_entries * sizeof(Elf64_Phdr);
    const bool phdrs_at_end = program_headers_at_end(spec.type);
    const uint64_t front = !phdrs_at_end || view ? phdrs_size : 0;
    plan.layout = layout_of(spec, n, view ? table_entries : phnum, seg.notes.size(), front,
                            view ? view->note.size() : 0);
    const Layout& L = plan.layout;

    // xen-dump-core(5) "Trailer notes": the trailer, NT_XEN_DIGEST then the unreadable area.
    plan.nr_chunks = (n + format::kDigestChunkPages - 1) / format::kDigestChunkPages;
    if (digests)
        plan.digest_note_size = kXenCoreHeader + sizeof(format::DigestDescHead) +
                                sizeof(XXH128_canonical_t) * (plan.nr_chunks + 2);
    plan.unreadable_area_offset = L.trailer_offset + plan.digest_note_size;
    plan.unreadable_area_size = unreadable_area_size(n);
    const uint64_t trailer_size = plan.digest_note_size + plan.unreadable_area_size;
    if (plan.unreadable_area_size - kXenCoreHeader > UINT32_MAX)
        throw Error("too many pages for the NT_XEN_UNREADABLE reservation (" + std::to_string(n) + ")");

    // The table descriptor: for HVM/PVH gmfn = pfn (xen-dump-core(5) "The PFN->GMFN table").
    plan.p2m_gmfn_is_pfn = !pv;
    plan.p2m_note_header = note_header(format::kNameXenCore, format::kNtXenP2m, L.p2m_desc_size);

    // xen-dump-core(5) "Sections": sections, after the trailer; the program headers last for PV.
    plan.shstrtab_offset = L.trailer_offset + trailer_size;
    SectionTable sections = section_table(spec, L, seg, trailer_size, plan.shstrtab_offset);
    plan.shstrtab = std::move(sections.shstrtab);
    plan.shdrs = std::move(sections.shdrs);
    plan.shdr_offset = align_up(plan.shstrtab_offset + plan.shstrtab.size(), 8);
    const uint64_t shdrs_end = plan.shdr_offset + sections.count * sizeof(Elf64_Shdr);
    plan.phdr_offset = phdrs_at_end ? shdrs_end : sizeof(Elf64_Ehdr);  // shdrs_end is 8-aligned
    plan.file_size = phdrs_at_end ? plan.phdr_offset + phdrs_size : shdrs_end;
    if (kernel_phdr_room) plan.kernel_phdr_offset = plan.phdr_offset + phnum * sizeof(Elf64_Phdr);
    if (L.phnum > UINT32_MAX) throw Error("too many program headers");

    // xen-dump-core(5) "ELF header": the ELF header, then (HVM/PVH) the
    // program headers, then the notes.
    plan.head = elf_header(spec, L, plan.phdr_offset, plan.shdr_offset, sections.count);
    plan.phdrs = program_headers(source, L, phdrs_size);
    plan.head.reserve(L.pages_offset);
    if (!phdrs_at_end) {
        plan.head.insert(plan.head.end(), plan.phdrs.begin(), plan.phdrs.end());
        plan.phdrs = {};  // in the head now (28 bytes a run; do not hold them twice)
    } else if (view) {
        const auto table = machine_view_headers(source, L, *view, phdrs_size);
        plan.head.insert(plan.head.end(), table.begin(), table.end());
    }
    plan.head.insert(plan.head.end(), seg.notes.bytes().begin(), seg.notes.bytes().end());
    if (view) plan.head.insert(plan.head.end(), view->note.begin(), view->note.end());
    plan.head.resize(L.pages_offset);

    plan.notes_digest = digest_of(seg.notes.bytes());
    StreamHash table;
    for_each_table_window(source, plan.p2m_gmfn_is_pfn,
                          [&](std::span<const PageEntry> w) { table.update(w.data(), w.size_bytes()); });
    plan.p2m_digest = table.finish_and_reset();
    return plan;
}

}  // namespace xendump::writer
