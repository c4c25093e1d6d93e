// A section-only ELF dump-core as `xl dump-core` writes it (see
// doc/legacy-formats.md 2): .note.Xen, .xen_prstatus, .xen_pages, .xen_p2m (PV)
// or .xen_pfn (HVM), .shstrtab; entries of ~0 with zero pages trailing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace xendump::test::xl_elf_gen {

struct XlSpec {
    bool hvm = false;
    unsigned guest_width = 8;         // 4: EM_386 (32-bit PV)
    std::vector<uint64_t> pfns;       // ascending; pages from fill_pattern_page(seed, pfn)
    uint64_t gmfn_base = 0x40000;     // PV gmfn = base + pfn * 3 (unique, not pfn)
    unsigned trailing_invalid = 3;    // ~0 entries at the end of the table
    unsigned nr_vcpus = 2;
    uint64_t seed = 5;
};

uint64_t gmfn_of(const XlSpec& spec, uint64_t pfn);
std::vector<std::byte> make_xl_core(const XlSpec& spec);

}  // namespace xendump::test::xl_elf_gen
