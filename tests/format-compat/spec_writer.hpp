// An independent writer of xen-dump-core v1 files, written from the text of
// the specification (../shared/spec/xen-core-format.md) and of xen-dump-core(5)
// "Trailer notes" / "How the writer lays the file out", not from the
// project's writer: it shares no code with libdump's writer and takes even
// its constants from the documents. It writes either trailer layout v1
// accepts:
//  - first_spec: the specification as first published (§5): NT_XEN_DIGEST,
//    then NT_XEN_UNREADABLE when pages were unreadable, and nothing else (no
//    trailer section at all when neither note is written);
//  - reserved_room: today's, NT_XEN_DIGEST then room for an NT_XEN_UNREADABLE
//    listing every page plus one note header, holding the real
//    NT_XEN_UNREADABLE (if any) and a padding note (type 14) of zeros.
// Pages go to the file with pwrite, all-zero ones left as holes, so a file
// with more than 65535 program headers (PN_XNUM) costs little disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace xendump::test::compat {

enum class Guest { pv64, pv32, hvm, pvh };
enum class Trailer { first_spec, reserved_room };

const char* name_of(Guest g);
const char* name_of(Trailer t);

struct Entry {
    uint64_t pfn, gmfn;
};

struct SpecFile {
    Guest guest = Guest::pv64;
    Trailer trailer = Trailer::first_spec;
    bool digests = true;
    std::vector<Entry> entries;        // ascending pfn; gmfn == pfn for HVM/PVH
    std::vector<uint64_t> unreadable;  // pfns of `entries` stored as zeros, ascending
    uint32_t nr_vcpus = 2;
    uint64_t seed = 1;
    // 0: most pages hold a pattern (every 7th is zero, a hole); m: only
    // pfns that are multiples of m do (large files stay small on disk).
    uint64_t pattern_every = 0;
};

// What a page of the guest holds (before unreadable pages are zeroed).
void guest_page(const SpecFile& spec, uint64_t pfn, std::span<std::byte> page);

// `n` pfns in runs of 1 to 5 pages separated by holes; PV gmfns unique and
// not in pfn order, HVM/PVH gmfn == pfn.
std::vector<Entry> sample_entries(uint64_t n, Guest g);
// `runs` runs of one page each (pfns 0, 2, 4, ...): runs + 1 program headers.
std::vector<Entry> single_page_runs(uint64_t runs, Guest g);

// Where things landed, for tests that change one of them.
struct Written {
    uint64_t file_size = 0;
    uint64_t pages_offset = 0;
    uint64_t table_desc_offset = 0;
    uint64_t trailer_offset = 0, trailer_size = 0;  // trailer_size 0: no trailer section
    uint64_t digest_note_offset = 0;      // 0: none
    uint64_t unreadable_note_offset = 0;  // 0: none
    uint64_t padding_note_offset = 0;     // 0: none
    uint64_t shstrtab_offset = 0;
    uint64_t shoff = 0;
    uint16_t shnum = 0;
    uint64_t phnum = 0;
    std::map<std::string, uint64_t> section_header;  // name -> offset of its Elf64_Shdr
    std::map<std::string, uint64_t> section_name;    // name -> offset of the name in .shstrtab
};

Written write_spec_file(const SpecFile& spec, const std::filesystem::path& path);

// Overwrites bytes of a written file in place.
void patch_file(const std::filesystem::path& path, uint64_t offset, std::span<const std::byte> bytes);
template <class T>
void patch_value(const std::filesystem::path& path, uint64_t offset, T v) {
    patch_file(path, offset, std::as_bytes(std::span(&v, 1)));
}
std::vector<std::byte> read_file(const std::filesystem::path& path, uint64_t offset, uint64_t size);
template <class T>
T read_value(const std::filesystem::path& path, uint64_t offset) {
    T v;
    const auto b = read_file(path, offset, sizeof v);
    std::memcpy(&v, b.data(), sizeof v);
    return v;
}

}  // namespace xendump::test::compat
