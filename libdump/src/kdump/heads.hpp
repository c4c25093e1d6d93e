// Block 0 (disk_dump_header) and the sub header of a compact file, made in
// one place from what the file's notes record (xen-dump-core(5), "The
// compact format"): the writer writes what make_heads returns, and verify
// rebuilds the same two blocks from the notes of the file it checks and
// compares them field by field (head_fields(): every byte of both blocks),
// so a header changed after the fact is a finding naming the field and its
// offset. What the notes cannot give back (the guest's utsname, the status
// and dump level, the bitmaps' digests) the writer records in
// NT_XEN_KDUMP_HEAD, a note before NT_XEN_DIGEST, whose digest covers it.
#pragma once

#include <xxhash.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kdump/format.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"

namespace xendump::kdump {

// NT_XEN_KDUMP_HEAD's descriptor ("XEN CORE", format::kNtXenKdumpHead).
struct HeadNote {
    uint32_t status;                    // the header's status (the compression's flag)
    int32_t dump_level;                 // the sub header's dump_level
    uint8_t bitmap_digest[2][16];       // XXH3-128 (canonical) of the 1st and of the 2nd bitmap
    UtsName utsname;                    // the header's utsname
    char pad[2];                        // zeros: 8-byte multiple
};
static_assert(sizeof(HeadNote) == 432);

struct Heads {
    DiskDumpHeader header{};
    KdumpSubHeader sub{};
};

// What the two blocks are made of, and where each comes from.
struct HeadFacts {
    HeadNote recorded{};             // NT_XEN_KDUMP_HEAD
    int64_t time = 0;                // NT_XEN_DOMAIN's TIME (dump_time)
    uint64_t nr_cpus = 0;            // the vcpu contexts (NT_XEN_PRSTATUS)
    uint64_t max_mapnr = 0;          // the highest frame of the bitmaps + 1
    uint64_t phys_base = 0;          // VMCOREINFO's NUMBER(phys_base)
    uint64_t offset_vmcoreinfo = 0;  // the VMCOREINFO note's descriptor (0, 0: none or empty)
    uint64_t size_vmcoreinfo = 0;
    uint64_t offset_note = 0;        // the note area: after the page data, to the end of the file
    uint64_t size_note = 0;
};

Heads make_heads(const HeadFacts& f);

// Block 0 then the sub header's block (sub_hdr_size 1), as written.
std::vector<std::byte> head_blocks(const Heads& h);

// bitmap_blocks for frames [0, max_mapnr): both bitmaps, whole blocks each.
inline uint64_t bitmap_blocks_for(uint64_t max_mapnr) {
    return 2 * (((max_mapnr + 7) / 8 + kBlockSize - 1) / kBlockSize);
}

// TIME= (RFC 3339, UTC, "2025-06-01T10:15:00Z") as seconds, else 0.
int64_t dump_time(const KeyValues& domain);

// utsname when the guest's own could not be read: sysname Linux, machine
// from the guest width, the release from VMCOREINFO (when there is one).
UtsName fallback_utsname(unsigned guest_width, const kernel::Vmcoreinfo* info);

// One field of the two blocks: file offset, size, and what gives its value.
struct HeadField {
    std::string_view structure;  // "disk_dump_header" or "kdump_sub_header"
    std::string_view name;
    uint32_t offset;             // in the file
    uint32_t size;
    std::string_view source;     // where make_heads takes it from
    bool text;                   // a NUL-terminated char field
};

// Every byte of block 0 and of the sub header's block, each once, in order.
std::span<const HeadField> head_fields();

}  // namespace xendump::kdump
