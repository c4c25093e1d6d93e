#include "util/util.hpp"
#include "writer/section_table.hpp"

#include <elf.h>

#include <string_view>

namespace xendump::writer {

using elfcore::bytes_of;
using elfcore::note_header_size;

namespace {

struct Section {
    const char* name;
    uint32_t type;
    uint64_t offset, size, entsize, addralign;
};

std::vector<Section> sections_of(const DumpSpec& spec, const Layout& L, const NoteSegment& seg, uint64_t trailer_size) {
    using util::kPage;
    const uint64_t xen_core_header = note_header_size(format::kNameXenCore);
    std::vector<Section> s;
    s.push_back({"", SHT_NULL, 0, 0, 0, 0});
    s.push_back({".shstrtab", SHT_STRTAB, 0, 0, 0, 1});  // placed by the caller
    s.push_back({".note.Xen", SHT_NOTE, L.notes_offset, seg.note_xen_size, 0, 4});
    s.push_back({".xen_prstatus", SHT_PROGBITS, L.notes_offset + seg.prstatus_desc, seg.prstatus_size,
                 format::kVcpuSlotSize, 8});
    if (spec.shared_info)
        s.push_back({".xen_shared_info", SHT_PROGBITS, L.notes_offset + seg.shared_info_desc,
                     format::kSharedInfoSize, format::kSharedInfoSize, 8});
    s.push_back({".xen_pages", SHT_PROGBITS, L.pages_offset, L.pages_size, kPage, kPage});
    s.push_back({".note.xen_p2m", SHT_NOTE, L.p2m_note_offset, xen_core_header + L.p2m_desc_size, 0, 8});
    if (spec.type == format::GuestType::pv)
        s.push_back({".xen_p2m", SHT_PROGBITS, L.p2m_desc_offset, L.p2m_desc_size, sizeof(PageEntry), 8});
    else
        s.push_back({".xen_pfn", SHT_PROGBITS, L.pfn_offset, L.pfn_size, sizeof(uint64_t), 8});
    s.push_back({".note.xen_trailer", SHT_NOTE, L.trailer_offset, trailer_size, 0, 8});
    return s;
}

}  // namespace

SectionTable section_table(const DumpSpec& spec, const Layout& L, const NoteSegment& seg, uint64_t trailer_size,
                           uint64_t shstrtab_offset) {
    std::vector<Section> sections = sections_of(spec, L, seg, trailer_size);
    SectionTable t;
    t.count = sections.size();
    t.shstrtab.push_back(std::byte{0});
    std::vector<uint32_t> name_offsets;
    for (const auto& s : sections) {
        if (!*s.name) {
            name_offsets.push_back(0);
            continue;
        }
        name_offsets.push_back(static_cast<uint32_t>(t.shstrtab.size()));
        for (char c : std::string_view(s.name)) t.shstrtab.push_back(static_cast<std::byte>(c));
        t.shstrtab.push_back(std::byte{0});
    }
    sections[1].offset = shstrtab_offset;
    sections[1].size = t.shstrtab.size();
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
        auto b = bytes_of(sh);
        t.shdrs.insert(t.shdrs.end(), b.begin(), b.end());
    }
    return t;
}

}  // namespace xendump::writer
