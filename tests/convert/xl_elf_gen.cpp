#include "xl_elf_gen.hpp"

#include <elf.h>

#include <cstring>
#include <string>

#include "test_support.hpp"

namespace xendump::test::xl_elf_gen {
namespace {

constexpr uint64_t kPage = 4096;

void append(std::vector<std::byte>& out, const void* p, size_t n) {
    auto b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
}

void note(std::vector<std::byte>& out, uint32_t type, const void* desc, uint32_t size) {
    uint32_t head[3] = {4, size, type};
    append(out, head, sizeof head);
    append(out, "Xen\0", 4);
    append(out, desc, size);
}

}  // namespace

uint64_t gmfn_of(const XlSpec& s, uint64_t pfn) { return s.hvm ? pfn : s.gmfn_base + pfn * 3; }

std::vector<std::byte> make_xl_core(const XlSpec& s) {
    const uint64_t n = s.pfns.size() + s.trailing_invalid;
    const size_t ctx = s.guest_width == 4 && !s.hvm ? 2800 : 5168;

    std::vector<std::byte> notes;
    note(notes, 0x2000000, nullptr, 0);
    uint64_t header[4] = {s.hvm ? 0xF00FEBEEull : 0xF00FEBEDull, s.nr_vcpus, n, kPage};
    note(notes, 0x2000001, header, sizeof header);
    std::vector<std::byte> version(1280);
    uint64_t major = 4, minor = 17;
    std::memcpy(version.data(), &major, 8);
    std::memcpy(version.data() + 8, &minor, 8);
    std::memcpy(version.data() + 1272, &kPage, 8);
    note(notes, 0x2000002, version.data(), 1280);
    uint64_t fv = 1;
    note(notes, 0x2000003, &fv, 8);

    std::vector<std::byte> prstatus(ctx * s.nr_vcpus);
    for (size_t i = 0; i < prstatus.size(); ++i) prstatus[i] = std::byte(static_cast<uint8_t>(i * 13));

    const std::string shstr = std::string("\0.shstrtab\0.note.Xen\0.xen_prstatus\0.xen_pages\0", 46) +
                              (s.hvm ? ".xen_pfn" : ".xen_p2m") + std::string(1, '\0');
    const uint32_t name_shstrtab = 1, name_note = 11, name_prstatus = 21, name_pages = 35, name_table = 46;
    const unsigned shnum = 6;

    // Layout: ehdr, section headers, shstrtab, notes, prstatus, pages (aligned), table.
    uint64_t off = sizeof(Elf64_Ehdr) + shnum * sizeof(Elf64_Shdr);
    uint64_t shstr_at = off;
    off += shstr.size();
    off = (off + 7) & ~7ull;
    uint64_t notes_at = off;
    off += notes.size();
    uint64_t pr_at = (off + 7) & ~7ull;
    off = pr_at + prstatus.size();
    uint64_t pages_at = (off + kPage - 1) & ~(kPage - 1);
    uint64_t table_at = pages_at + n * kPage;
    uint64_t table_size = n * (s.hvm ? 8 : 16);

    std::vector<std::byte> out(table_at + table_size);
    Elf64_Ehdr eh = core_elf_header(s.guest_width == 4 && !s.hvm ? EM_386 : EM_X86_64);
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_shoff = sizeof(Elf64_Ehdr);
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = shnum;
    eh.e_shstrndx = 1;
    std::memcpy(out.data(), &eh, sizeof eh);

    auto shdr = [&](unsigned i, uint32_t name, uint32_t type, uint64_t at, uint64_t size, uint64_t entsize,
                    uint64_t align) {
        Elf64_Shdr sh{};
        sh.sh_name = name;
        sh.sh_type = type;
        sh.sh_offset = at;
        sh.sh_size = size;
        sh.sh_entsize = entsize;
        sh.sh_addralign = align;
        std::memcpy(out.data() + sizeof(Elf64_Ehdr) + i * sizeof(Elf64_Shdr), &sh, sizeof sh);
    };
    shdr(1, name_shstrtab, SHT_STRTAB, shstr_at, shstr.size(), 0, 1);
    shdr(2, name_note, SHT_NOTE, notes_at, notes.size(), 0, 4);
    shdr(3, name_prstatus, SHT_PROGBITS, pr_at, prstatus.size(), ctx, 8);
    shdr(4, name_pages, SHT_PROGBITS, pages_at, n * kPage, kPage, kPage);
    shdr(5, name_table, SHT_PROGBITS, table_at, table_size, s.hvm ? 8 : 16, 8);
    std::memcpy(out.data() + shstr_at, shstr.data(), shstr.size());
    std::memcpy(out.data() + notes_at, notes.data(), notes.size());
    std::memcpy(out.data() + pr_at, prstatus.data(), prstatus.size());
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t pfn = i < s.pfns.size() ? s.pfns[i] : ~uint64_t{0};
        if (pfn != ~uint64_t{0}) fill_pattern_page(s.seed, pfn, out.data() + pages_at + i * kPage);
        if (s.hvm) {
            std::memcpy(out.data() + table_at + i * 8, &pfn, 8);
        } else {
            uint64_t pair[2] = {pfn, pfn == ~uint64_t{0} ? ~uint64_t{0} : gmfn_of(s, pfn)};
            std::memcpy(out.data() + table_at + i * 16, pair, 16);
        }
    }
    return out;
}

}  // namespace xendump::test::xl_elf_gen
