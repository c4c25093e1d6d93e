// The v1 ELF header (xen-dump-core(5) "ELF header") and program header
// table ("Program headers"): PT_NOTE over
// the note segment, one PT_LOAD per run of consecutive pfns, and zeros for
// the kernel image segment's room.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "writer/plan.hpp"

namespace xendump::writer {

// The 64-byte ELF header; `shnum` sections, program headers at `phoff`.
std::vector<std::byte> elf_header(const DumpSpec& spec, const Layout& layout, uint64_t phoff, uint64_t shoff,
                                  uint64_t shnum);

// The program header table, `size` bytes (room after the runs stays zeros).
std::vector<std::byte> program_headers(const PageSource& source, const Layout& layout, uint64_t size);

// Maximal runs of consecutive pfns (one PT_LOAD each).
uint64_t count_runs(const PageSource& source);

}  // namespace xendump::writer
