#include "writer/elf_headers.hpp"

#include <elf.h>

#include <cstring>

#include "writer/notes.hpp"
#include "writer/runs.hpp"

namespace xendump::writer {

namespace {

template <typename T>
void append(std::vector<std::byte>& out, const T& v) {
    auto b = bytes_of(v);
    out.insert(out.end(), b.begin(), b.end());
}

}  // namespace

uint64_t count_runs(const PageSource& source) {
    uint64_t runs = 0;
    for_each_run(source, [&](uint64_t, uint64_t, uint64_t) { ++runs; });
    return runs;
}

std::vector<std::byte> elf_header(const DumpSpec& spec, const Layout& L, uint64_t phoff, uint64_t shoff,
                                  uint64_t shnum) {
    Elf64_Ehdr eh{};
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
    eh.e_type = ET_CORE;
    eh.e_machine = (spec.type == format::GuestType::pv && spec.guest_width == 4) ? EM_386 : EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = phoff;
    eh.e_shoff = shoff;
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = static_cast<Elf64_Half>(L.phnum >= PN_XNUM ? PN_XNUM : L.phnum);
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = static_cast<Elf64_Half>(shnum);
    eh.e_shstrndx = 1;
    std::vector<std::byte> out;
    append(out, eh);
    return out;
}

std::vector<std::byte> program_headers(const PageSource& source, const Layout& L, uint64_t size) {
    constexpr uint64_t kPage = format::kPageSize;
    std::vector<std::byte> out;
    out.reserve(size);
    Elf64_Phdr note{};
    note.p_type = PT_NOTE;
    note.p_offset = L.notes_offset;
    note.p_filesz = note.p_memsz = L.notes_size;
    // 4: the notes use the standard layout (names padded to 4); with 8 some
    // readers would apply 8-byte note rules and misplace "CORE" descriptors.
    note.p_align = 4;
    append(out, note);
    for_each_run(source, [&](uint64_t i, uint64_t pfn, uint64_t count) {
        Elf64_Phdr load{};
        load.p_type = PT_LOAD;
        load.p_flags = PF_R | PF_W | PF_X;
        load.p_offset = L.pages_offset + i * kPage;
        load.p_paddr = pfn * kPage;
        load.p_vaddr = 0;
        load.p_filesz = load.p_memsz = count * kPage;
        load.p_align = 0;  // as the kernel's /proc/vmcore: crash then reads KERNELOFFSET (xen-dump-core(5))
        append(out, load);
    });
    out.resize(size);  // the kernel image header's room stays zeros
    return out;
}

}  // namespace xendump::writer
