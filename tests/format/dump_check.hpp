// Test helpers for the writer: input builders and an independent parser of
// v1 files (plain <elf.h> structs and pread, no libelf, no writer code), so
// the tests check the writer against the spec rather than against itself.
#pragma once

#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "xendump/dump_spec.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {

// Entries {pfn, gmfn} for the given pfns; PV gmfns are a unique scramble,
// HVM/PVH gmfn == pfn.
std::vector<PageEntry> entries_for(const std::vector<uint64_t>& pfns, format::GuestType type);

// The first `count` pfns from 0 but one in five (pfn % 5 == 3): many runs.
std::vector<uint64_t> pfns_with_holes(uint64_t count);

// A spec with `nr_vcpus` contexts of the native size, a Xen version, domain
// keys and (PV) a shared_info page.
DumpSpec make_spec(format::GuestType type, unsigned guest_width, unsigned nr_vcpus);

struct ParsedNote {
    std::string name;
    uint32_t type = 0;
    uint64_t desc_offset = 0;  // file offset
    std::vector<std::byte> desc;
};

class ParsedDump {
public:
    explicit ParsedDump(const std::filesystem::path& path);
    Elf64_Ehdr eh{};
    uint64_t phnum = 0;
    std::vector<Elf64_Phdr> ph;
    std::vector<Elf64_Shdr> sh;
    std::vector<std::string> sh_names;
    uint64_t file_size = 0;

    const Elf64_Shdr* section(const std::string& name) const;
    std::vector<std::byte> read(uint64_t offset, uint64_t size) const;
    // Notes with the standard layout (name and descriptor padded to 4),
    // throws std::runtime_error when they do not parse exactly to the end.
    std::vector<ParsedNote> notes(uint64_t offset, uint64_t size) const;

private:
    std::filesystem::path path_;
};

// Every check of the file against its input (xen-dump-core(5) "ELF header"-xen-dump-core(5) "Layout"): headers, segments,
// notes, sections, pages, table, digests, unreadable list. Uses gtest
// assertions; `source` must produce the same pages again.
void check_dump(const std::filesystem::path& path, const DumpSpec& spec, PatternPageSource& source,
                bool digests = true);

// The pages that `source` holds, in table order, as the file must store them.
std::vector<std::byte> expected_page(PatternPageSource& source, size_t index);

}  // namespace xendump::test
