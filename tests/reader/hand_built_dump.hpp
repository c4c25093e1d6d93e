// A v1 dump built byte by byte from <elf.h> structs, straight from the spec
// (xen-dump-core(5)), without the library's writer: an independent
// generator, and a map of where every structure landed so tests can corrupt
// exactly one thing and expect the verifier to name that offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "xendump/format.hpp"
#include "xendump/page_source.hpp"

namespace xendump::test {

struct HandBuildSpec {
    format::GuestType type = format::GuestType::pv;
    std::vector<PageEntry> entries;  // ascending pfn
    uint32_t nr_vcpus = 2;
    uint64_t seed = 7;
    bool digests = true;
    bool split_first_run = false;  // two PT_LOADs for the first run (non-conforming)
};

struct HandBuiltDump {
    std::vector<std::byte> bytes;
    uint64_t phoff = 0, shoff = 0;
    uint64_t notes_offset = 0, notes_size = 0;
    std::map<std::string, uint64_t> note_offset;  // "xen-header", "core-header", "domain", "prstatus", ...
    uint64_t pages_offset = 0;
    uint64_t table_note_offset = 0, table_desc_offset = 0;
    uint64_t pfn_array_offset = 0;
    uint64_t digest_note_offset = 0;      // 0 without digests
    uint64_t trailer_offset = 0;          // .note.xen_trailer
    uint64_t unreadable_note_offset = 0;  // the (empty) NT_XEN_UNREADABLE in the trailer
    uint64_t padding_note_offset = 0;     // the trailer's padding note
    std::map<std::string, uint64_t> section_header;  // name -> offset of its Elf64_Shdr
    std::map<std::string, uint64_t> section_name;    // name -> offset of the name in .shstrtab
    size_t nr_loads = 0;

    uint64_t phdr_offset(size_t i) const { return phoff + i * 56; }
    void write(const std::filesystem::path& path) const;

    // Little helpers to corrupt the image in place.
    template <class T>
    T get(uint64_t off) const;
    template <class T>
    void put(uint64_t off, T v);
};

HandBuiltDump build_hand_dump(const HandBuildSpec& spec);

// `n` present pfns in a few runs with holes, gmfns scrambled (PV) or == pfn.
std::vector<PageEntry> sample_entries(uint64_t n, bool pv);

}  // namespace xendump::test

#include <cstring>

namespace xendump::test {
template <class T>
T HandBuiltDump::get(uint64_t off) const {
    T v;
    std::memcpy(&v, bytes.data() + off, sizeof v);
    return v;
}
template <class T>
void HandBuiltDump::put(uint64_t off, T v) {
    std::memcpy(bytes.data() + off, &v, sizeof v);
}
}  // namespace xendump::test
