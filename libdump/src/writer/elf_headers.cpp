#include "writer/elf_headers.hpp"

#include <elf.h>

#include <cstring>

#include "util/util.hpp"
#include "writer/notes.hpp"

namespace xendump::writer {

namespace {

template <typename T>
void append(std::vector<std::byte>& out, const T& v) {
    auto b = bytes_of(v);
    out.insert(out.end(), b.begin(), b.end());
}

}  // namespace

uint64_t count_runs(std::span<const PageEntry> entries) {
    uint64_t runs = 0;
    for (uint64_t i = 0; i < entries.size(); ++i)
        if (i == 0 || entries[i].pfn != entries[i - 1].pfn + 1) ++runs;
    return runs;
}

std::vector<std::byte> elf_header(const DumpSpec& spec, const Layout& L, uint64_t phoff, uint64_t shoff,
                                  uint64_t shnum) {
    Elf64_Ehdr eh =
        util::core_elf_header((spec.type == format::GuestType::pv && spec.guest_width == 4) ? EM_386 : EM_X86_64);
    eh.e_phoff = phoff;
    eh.e_shoff = shoff;
    eh.e_phnum = static_cast<Elf64_Half>(L.phnum >= PN_XNUM ? PN_XNUM : L.phnum);
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = static_cast<Elf64_Half>(shnum);
    eh.e_shstrndx = 1;
    std::vector<std::byte> out;
    append(out, eh);
    return out;
}

std::vector<std::byte> program_headers(std::span<const PageEntry> entries, const Layout& L, uint64_t size) {
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
    const uint64_t n = entries.size();
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
        append(out, load);
        i = j;
    }
    out.resize(size);  // the kernel image header's room stays zeros
    return out;
}

}  // namespace xendump::writer
