#include "hostile_files.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

#include "../convert/xl_elf_gen.hpp"

namespace xendump::test {

void write_bytes(const std::filesystem::path& p, const std::vector<std::byte>& b) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) throw std::runtime_error("cannot write " + p.string());
}

uint64_t shdr_of(const std::vector<std::byte>& b, const std::string& name) {
    Elf64_Ehdr eh;
    std::memcpy(&eh, b.data(), sizeof eh);
    Elf64_Shdr strtab;
    std::memcpy(&strtab, b.data() + eh.e_shoff + eh.e_shstrndx * sizeof(Elf64_Shdr), sizeof strtab);
    for (unsigned i = 0; i < eh.e_shnum; ++i) {
        Elf64_Shdr sh;
        const uint64_t at = eh.e_shoff + i * sizeof(Elf64_Shdr);
        std::memcpy(&sh, b.data() + at, sizeof sh);
        if (name == reinterpret_cast<const char*>(b.data() + strtab.sh_offset + sh.sh_name)) return at;
    }
    throw std::runtime_error("no section " + name);
}

uint64_t xl_nr_vcpus_offset(const std::vector<std::byte>& b) {
    Elf64_Shdr sh;
    std::memcpy(&sh, b.data() + shdr_of(b, ".note.Xen"), sizeof sh);
    // Note 1 (DUMPCORE_NONE, 16 bytes), then note 2's 16-byte header and
    // its descriptor: magic, nr_vcpus, nr_pages, page_size.
    return sh.sh_offset + 16 + 16 + 8;
}

std::vector<std::byte> xl_vcpu_amplification(uint64_t pages) {
    xl_elf_gen::XlSpec spec;
    for (uint64_t p = 0; p < pages; ++p) spec.pfns.push_back(p);
    auto b = xl_elf_gen::make_xl_core(spec);
    const uint64_t huge = uint64_t{1} << 40;
    std::memcpy(b.data() + xl_nr_vcpus_offset(b), &huge, 8);
    const uint64_t pr = shdr_of(b, ".xen_prstatus");
    Elf64_Shdr sh;
    std::memcpy(&sh, b.data() + pr, sizeof sh);
    sh.sh_offset = 0;
    sh.sh_size = b.size();
    sh.sh_entsize = 1;
    std::memcpy(b.data() + pr, &sh, sizeof sh);
    return b;
}

}  // namespace xendump::test
