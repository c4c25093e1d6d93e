// The ELF structure of a dump: the header checked byte by byte, PN_XNUM and
// extended section counts resolved, program and section headers read through
// libelf (elfutils) after their tables were checked to lie inside the file.
#pragma once

#include <gelf.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reader/checked.hpp"
#include "reader/dump_file.hpp"
#include "xendump/reader.hpp"

namespace xendump::reader {

struct Section {
    size_t index = 0;
    std::string name;            // at most kMaxSectionName bytes kept
    GElf_Shdr shdr{};
    uint64_t header_offset = 0;  // file offset of this section header
    bool in_file = true;         // [sh_offset, sh_offset + sh_size) inside the file
    std::string structure() const { return "section [" + std::to_string(index) + "] " + printable(name); }
};

// Names longer than this are no name of the format: the rest is not kept
// (else many sections naming one long string would each hold a copy).
inline constexpr size_t kMaxSectionName = 64;

struct Segment {
    size_t index = 0;
    GElf_Phdr phdr{};
    uint64_t header_offset = 0;
    bool in_file = true;
    std::string structure() const { return "program header [" + std::to_string(index) + "]"; }
};

struct ElfLayout {
    Elf64_Ehdr ehdr{};
    uint64_t phnum = 0;  // resolved (PN_XNUM)
    uint64_t shnum = 0;  // resolved (SHN_UNDEF + section 0 sh_size)
    std::vector<Segment> segments;  // without the trailing PT_NULLs
    std::vector<Section> sections;

    const Section* find(std::string_view name) const;
};

// Throws CheckError ("elf-ident", "phoff-range", "shoff-range", "pn-xnum",
// "section-range" for the name table) when the file cannot be read as ELF.
// Segments and sections outside the file are added to `findings`
// ("segment-range", "section-range") and marked !in_file.
ElfLayout read_elf_layout(const DumpFile& file, std::vector<Finding>& findings);

}  // namespace xendump::reader
