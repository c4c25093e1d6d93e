#include "writer/plan.hpp"

#include <elf.h>

#include <cstring>
#include <string>

#include "writer/header_notes.hpp"
#include "writer/notes.hpp"
#include "xendump/error.hpp"

namespace xendump::writer {

namespace {

constexpr uint64_t kPage = format::kPageSize;
// A "XEN CORE" note header: 12 bytes plus the 9-byte name padded to 12.
const uint64_t kXenCoreHeader = note_header_size(format::kNameXenCore);

template <typename T>
void append(std::vector<std::byte>& out, const T& v) {
    auto b = bytes_of(v);
    out.insert(out.end(), b.begin(), b.end());
}

struct SectionPlan {
    const char* name;
    uint32_t type;
    uint64_t offset, size, entsize, addralign;
};

}  // namespace

void validate_spec(const DumpSpec& spec, std::span<const PageEntry> entries) {
    if (spec.vcpus.empty()) throw Error("refusing to write a dump without any vcpu context");
    if (spec.guest_width != 4 && spec.guest_width != 8)
        throw Error("guest width must be 4 or 8, not " + std::to_string(spec.guest_width));
    const bool pv32 = spec.type == format::GuestType::pv && spec.guest_width == 4;
    const size_t max_ctx = pv32 ? format::kVcpuContextSize32 : format::kVcpuSlotSize;
    for (const auto& v : spec.vcpus) {
        if (v.bytes.empty() || v.bytes.size() > max_ctx)
            throw Error("vcpu " + std::to_string(v.id) + ": context of " + std::to_string(v.bytes.size()) +
                        " bytes (expected at most " + std::to_string(max_ctx) + ")");
    }
    if (spec.shared_info && spec.shared_info->size() != format::kSharedInfoSize)
        throw Error("shared_info must be " + std::to_string(format::kSharedInfoSize) + " bytes, not " +
                    std::to_string(spec.shared_info->size()));
    for (size_t i = 0; i < entries.size(); ++i) {
        // pfn * page size must fit p_paddr.
        if (entries[i].pfn > (UINT64_MAX >> format::kPageShift))
            throw Error("page entry " + std::to_string(i) + ": pfn " + std::to_string(entries[i].pfn) +
                        " too large");
        if (i > 0 && entries[i].pfn <= entries[i - 1].pfn)
            throw Error("page entries not in strictly ascending pfn order at index " + std::to_string(i) +
                        " (pfn " + std::to_string(entries[i].pfn) + " after " +
                        std::to_string(entries[i - 1].pfn) + ")");
    }
    // NT_XEN_P2M's descsz is a u32 (ELF note layout): 16 bytes a page.
    if (entries.size() > (UINT32_MAX - 64) / sizeof(PageEntry))
        throw Error("too many pages for one NT_XEN_P2M note (" + std::to_string(entries.size()) + ")");
}

XXH128_canonical_t digest_of(std::span<const std::byte> bytes) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), bytes.size()));
    return c;
}

uint64_t vmcoreinfo_room_size() {
    return note_header_size(format::kNameVmcoreinfo) +
           note_padded_desc_size(format::kNameVmcoreinfo, DumpSpec::kMaxVmcoreinfoText) + kXenCoreHeader;
}

uint64_t unreadable_area_size(uint64_t nr_pages) {
    // NT_XEN_UNREADABLE for every page (count + pfns) plus room for the header
    // of the padding note that fills whatever is left (xen-dump-core(5) "Trailer notes").
    return kXenCoreHeader + 8 + 8 * nr_pages + kXenCoreHeader;
}

bool program_headers_at_end(format::GuestType type) { return type == format::GuestType::pv; }

DumpPlan plan_dump(const DumpSpec& spec, std::span<const PageEntry> entries, bool digests) {
    validate_spec(spec, entries);
    DumpPlan plan;
    Layout& L = plan.layout;
    const uint64_t n = entries.size();
    const bool pv = spec.type == format::GuestType::pv;

    // xen-dump-core(5) "Program headers": one PT_LOAD per maximal run of consecutive pfns.
    for (uint64_t i = 0; i < n; ++i)
        if (i == 0 || entries[i].pfn != entries[i - 1].pfn + 1) ++plan.nr_runs;
    L.phnum = 1 + plan.nr_runs;

    // xen-dump-core(5) "Notes": the note segment.
    NoteBuffer notes;
    const uint64_t note_xen_size = add_header_notes(notes, spec, n);  // notes 1-4: .note.Xen

    KeyValues domain = domain_keys(spec, n);
    std::string domain_text = domain.serialize();
    domain_text.push_back('\0');  // C-string readers; the padding adds more NULs
    // Room for late keys: more NULs, which every reader already ignores.
    if (spec.reserve_vmcoreinfo) domain_text.resize(domain_text.size() + DumpSpec::kKernelKeysRoom, '\0');
    plan.domain_desc_offset = notes.add(format::kNameXenCore, format::kNtXenDomain, std::as_bytes(std::span(domain_text)));
    plan.domain_desc_size = notes.size() - plan.domain_desc_offset;
    plan.domain = std::move(domain);
    plan.late_room = spec.reserve_vmcoreinfo;
    if (spec.vmcoreinfo) {
        notes.add(format::kNameVmcoreinfo, format::kNtVmcoreinfo, std::as_bytes(std::span(*spec.vmcoreinfo)));
    } else if (spec.reserve_vmcoreinfo) {
        plan.vmcoreinfo_room_offset = notes.size();
        const std::vector<std::byte> zeros(vmcoreinfo_room_size() - kXenCoreHeader);
        notes.add(format::kNameXenCore, format::kNtXenPadding, zeros);
        plan.vmcoreinfo_room_size = notes.size() - plan.vmcoreinfo_room_offset;
    }
    for (const auto& p : spec.prstatus) notes.add(format::kNameCore, format::kNtPrstatus, p);

    // Note 9: fixed 5168-byte slots; a 32-bit context fills the slot's start.
    const uint64_t prstatus_desc = notes.add(format::kNameXenCore, format::kNtXenPrstatus, vcpu_slots(spec));
    uint64_t shared_info_desc = 0;
    if (spec.shared_info)
        shared_info_desc = notes.add(format::kNameXenCore, format::kNtXenSharedInfo, *spec.shared_info);

    // xen-dump-core(5) "Layout" layout. One program header of room after the PT_LOADs when the
    // guest kernel may be found (LateNotes::kernel_image), whatever is found.
    // The table precedes the notes, or (PV) follows the section headers.
    const bool elf64_guest = !(pv && spec.guest_width == 4);
    const bool kernel_room = spec.reserve_vmcoreinfo && elf64_guest && L.phnum + 1 < PN_XNUM;
    const uint64_t phdrs_size = (L.phnum + (kernel_room ? 1 : 0)) * sizeof(Elf64_Phdr);
    const bool phdrs_at_end = program_headers_at_end(spec.type);
    L.notes_offset = sizeof(Elf64_Ehdr) + (phdrs_at_end ? 0 : phdrs_size);
    L.notes_size = notes.size();
    L.pages_offset = align_up(L.notes_offset + L.notes_size, kPage);
    L.pages_size = n * kPage;
    // xen-dump-core(5) "The PFN->GMFN table": the table note's descriptor starts on a page boundary.
    L.p2m_desc_offset = align_up(L.pages_offset + L.pages_size + kXenCoreHeader, kPage);
    L.p2m_note_offset = L.p2m_desc_offset - kXenCoreHeader;
    L.p2m_desc_size = n * sizeof(PageEntry);
    const uint64_t after_p2m = L.p2m_desc_offset + L.p2m_desc_size;
    if (!pv) {
        L.pfn_offset = after_p2m;
        L.pfn_size = n * sizeof(uint64_t);
    }
    L.trailer_offset = after_p2m + L.pfn_size;
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
    plan.p2m = entries;
    if (!pv) {
        bool identity = true;
        for (const auto& e : entries) identity = identity && e.gmfn == e.pfn;
        if (!identity) {
            plan.p2m_copy.reserve(n);
            for (const auto& e : entries) plan.p2m_copy.push_back({e.pfn, e.pfn});
            plan.p2m = plan.p2m_copy;
        }
    }
    plan.p2m_note_header = note_header(format::kNameXenCore, format::kNtXenP2m, L.p2m_desc_size);

    // xen-dump-core(5) "Sections": sections, in the order of the table.
    std::vector<SectionPlan> sections;
    sections.push_back({"", SHT_NULL, 0, 0, 0, 0});
    sections.push_back({".shstrtab", SHT_STRTAB, 0, 0, 0, 1});  // placed below
    sections.push_back({".note.Xen", SHT_NOTE, L.notes_offset, note_xen_size, 0, 4});
    sections.push_back({".xen_prstatus", SHT_PROGBITS, L.notes_offset + prstatus_desc,
                        spec.vcpus.size() * format::kVcpuSlotSize,
                        format::kVcpuSlotSize, 8});
    if (spec.shared_info)
        sections.push_back({".xen_shared_info", SHT_PROGBITS, L.notes_offset + shared_info_desc,
                            format::kSharedInfoSize, format::kSharedInfoSize, 8});
    sections.push_back({".xen_pages", SHT_PROGBITS, L.pages_offset, L.pages_size, kPage, kPage});
    sections.push_back({".note.xen_p2m", SHT_NOTE, L.p2m_note_offset, kXenCoreHeader + L.p2m_desc_size, 0, 8});
    if (pv)
        sections.push_back({".xen_p2m", SHT_PROGBITS, L.p2m_desc_offset, L.p2m_desc_size, sizeof(PageEntry), 8});
    else
        sections.push_back({".xen_pfn", SHT_PROGBITS, L.pfn_offset, L.pfn_size, sizeof(uint64_t), 8});
    sections.push_back({".note.xen_trailer", SHT_NOTE, L.trailer_offset, trailer_size, 0, 8});

    plan.shstrtab.push_back(std::byte{0});
    std::vector<uint32_t> name_offsets;
    for (const auto& s : sections) {
        if (!*s.name) {
            name_offsets.push_back(0);
            continue;
        }
        name_offsets.push_back(static_cast<uint32_t>(plan.shstrtab.size()));
        std::string_view nm = s.name;
        for (char c : nm) plan.shstrtab.push_back(static_cast<std::byte>(c));
        plan.shstrtab.push_back(std::byte{0});
    }
    plan.shstrtab_offset = L.trailer_offset + trailer_size;
    sections[1].offset = plan.shstrtab_offset;
    sections[1].size = plan.shstrtab.size();
    plan.shdr_offset = align_up(plan.shstrtab_offset + plan.shstrtab.size(), 8);
    const uint64_t shdrs_end = plan.shdr_offset + sections.size() * sizeof(Elf64_Shdr);
    plan.phdr_offset = phdrs_at_end ? shdrs_end : sizeof(Elf64_Ehdr);  // shdrs_end is 8-aligned
    plan.file_size = phdrs_at_end ? plan.phdr_offset + phdrs_size : shdrs_end;
    if (kernel_room) plan.kernel_phdr_offset = plan.phdr_offset + L.phnum * sizeof(Elf64_Phdr);

    for (size_t i = 0; i < sections.size(); ++i) {
        Elf64_Shdr sh{};
        sh.sh_name = name_offsets[i];
        sh.sh_type = sections[i].type;
        sh.sh_offset = sections[i].offset;
        sh.sh_size = sections[i].size;
        sh.sh_entsize = sections[i].entsize;
        sh.sh_addralign = sections[i].addralign;
        // xen-dump-core(5) "ELF header": under PN_XNUM the real program header count lives here.
        if (i == 0 && L.phnum >= PN_XNUM) sh.sh_info = static_cast<Elf64_Word>(L.phnum);
        append(plan.shdrs, sh);
    }
    if (L.phnum > UINT32_MAX) throw Error("too many program headers");

    // xen-dump-core(5) "ELF header": the ELF header, then (HVM/PVH) the program headers, then the notes.
    Elf64_Ehdr eh{};
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
    eh.e_type = ET_CORE;
    eh.e_machine = (pv && spec.guest_width == 4) ? EM_386 : EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = plan.phdr_offset;
    eh.e_shoff = plan.shdr_offset;
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = static_cast<Elf64_Half>(L.phnum >= PN_XNUM ? PN_XNUM : L.phnum);
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = static_cast<Elf64_Half>(sections.size());
    eh.e_shstrndx = 1;

    Elf64_Phdr note{};
    note.p_type = PT_NOTE;
    note.p_offset = L.notes_offset;
    note.p_filesz = note.p_memsz = L.notes_size;
    // 4: the notes use the standard layout (names padded to 4); with 8 some
    // readers would apply 8-byte note rules and misplace "CORE" descriptors.
    note.p_align = 4;
    plan.phdrs.reserve(phdrs_size);
    append(plan.phdrs, note);
    for (uint64_t i = 0; i < n;) {
        uint64_t j = i + 1;
        while (j < n && entries[j].pfn == entries[j - 1].pfn + 1) ++j;
        Elf64_Phdr load{};
        load.p_type = PT_LOAD;
        load.p_flags = PF_R | PF_W | PF_X;
        load.p_offset = L.pages_offset + i * kPage;
        load.p_paddr = entries[i].pfn * kPage;
        load.p_vaddr = 0;
        load.p_filesz = load.p_memsz = (j - i) * kPage;
        load.p_align = 0;  // as the kernel's /proc/vmcore: crash then reads KERNELOFFSET (xen-dump-core(5))
        append(plan.phdrs, load);
        i = j;
    }
    plan.phdrs.resize(phdrs_size);  // the kernel image header's room stays zeros

    plan.head.reserve(L.pages_offset);
    append(plan.head, eh);
    if (!phdrs_at_end) {
        plan.head.insert(plan.head.end(), plan.phdrs.begin(), plan.phdrs.end());
        plan.phdrs = {};  // in the head now (28 bytes a run; do not hold them twice)
    }
    plan.head.insert(plan.head.end(), notes.bytes().begin(), notes.bytes().end());
    plan.head.resize(L.pages_offset);

    plan.notes_digest = digest_of(notes.bytes());
    plan.p2m_digest = digest_of(std::as_bytes(plan.p2m));
    return plan;
}

}  // namespace xendump::writer
