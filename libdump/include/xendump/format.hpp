// The xen-dump-core v1 file format as types; its normative specification is
// the man page xen-dump-core(5) (man/xen-dump-core.5). Plain data: no I/O.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace xendump::format {

inline constexpr uint64_t kPageSize = 4096;
inline constexpr unsigned kPageShift = 12;

// xch_magic of the header notes (and of the legacy xc_core header).
inline constexpr uint64_t kMagicPV = 0xF00FEBED;
inline constexpr uint64_t kMagicHVM = 0xF00FEBEE;

// Note names.
inline constexpr std::string_view kNameXen = "Xen";
inline constexpr std::string_view kNameXenCore = "XEN CORE";
inline constexpr std::string_view kNameVmcoreinfo = "VMCOREINFO";
inline constexpr std::string_view kNameCore = "CORE";

// Note types of the "Xen" notes (Xen's xen/include/public/elfnote.h).
inline constexpr uint32_t kNoteDumpcoreNone = 0x2000000;
inline constexpr uint32_t kNoteDumpcoreHeader = 0x2000001;
inline constexpr uint32_t kNoteDumpcoreXenVersion = 0x2000002;
inline constexpr uint32_t kNoteDumpcoreFormatVersion = 0x2000003;
inline constexpr uint64_t kDumpcoreFormatVersion = 1;

// Note types of the "XEN CORE" notes (the numbers libkdumpfile and crash know).
inline constexpr uint32_t kNtXenHeader = 7;
inline constexpr uint32_t kNtXenPrstatus = 8;
inline constexpr uint32_t kNtXenP2m = 9;
inline constexpr uint32_t kNtXenDomain = 10;
inline constexpr uint32_t kNtXenSharedInfo = 11;
inline constexpr uint32_t kNtXenDigest = 12;
inline constexpr uint32_t kNtXenUnreadable = 13;
// Filler in .note.xen_trailer: the writer reserves room for the largest
// NT_XEN_UNREADABLE up front (streaming output) and fills what is unused with
// one note of this type; readers skip it like any unknown note (xen-dump-core(5) "Notes", xen-dump-core(5) "Trailer notes").
inline constexpr uint32_t kNtXenPadding = 14;
// A compact (kdump) file's note area only: what its disk_dump_header and
// kdump_sub_header hold that no other note says (the utsname, status, dump
// level and the bitmaps' digests), so verify can rebuild both headers
// (xen-dump-core(5) "The compact format"; kdump/heads.hpp).
inline constexpr uint32_t kNtXenKdumpHead = 15;
inline constexpr uint32_t kNtPrstatus = 1;   // "CORE" NT_PRSTATUS
inline constexpr uint32_t kNtVmcoreinfo = 0;  // "VMCOREINFO"

// vcpu_guest_context_any_t slot size and native context sizes (x86).
inline constexpr size_t kVcpuSlotSize = 5168;
inline constexpr size_t kVcpuContextSize64 = 5168;
inline constexpr size_t kVcpuContextSize32 = 2800;
inline constexpr size_t kSharedInfoSize = 4096;

// Digest trailer.
inline constexpr uint32_t kDigestXxh3_128 = 1;
inline constexpr uint32_t kDigestChunkPages = 256;

// DUMPCORE_HEADER / NT_XEN_HEADER descriptor.
struct HeaderDesc {
    uint64_t xch_magic;
    uint64_t xch_nr_vcpus;
    uint64_t xch_nr_pages;
    uint64_t xch_page_size;
};
static_assert(sizeof(HeaderDesc) == 32);

// DUMPCORE_XEN_VERSION descriptor (Xen's docs/misc/dump-core-format.txt).
struct XenVersionDesc {
    uint64_t major_version;
    uint64_t minor_version;
    char extra_version[16];
    char compiler[64];
    char compile_by[16];
    char compile_domain[32];
    char compile_date[32];
    char capabilities[1024];
    char changeset[64];
    uint64_t platform_virt_start;
    uint64_t pagesize;
};
static_assert(sizeof(XenVersionDesc) == 1280);

// One entry of the PFN->GMFN table (NT_XEN_P2M, .xen_p2m).
struct P2mEntry {
    uint64_t pfn;
    uint64_t gmfn;
};
static_assert(sizeof(P2mEntry) == 16);

// NT_XEN_DIGEST descriptor head; followed by 16-byte canonical XXH128 digests.
struct DigestDescHead {
    uint32_t algorithm;
    uint32_t chunk_pages;
};
static_assert(sizeof(DigestDescHead) == 8);

enum class GuestType { pv, hvm, pvh };
std::string_view to_string(GuestType t);
GuestType guest_type_from_string(std::string_view s);  // throws Error

// p2m discovery method recorded as P2M=.
enum class P2mKind { tree, linear, translated, file };
std::string_view to_string(P2mKind k);

// Why a dump was taken, recorded as REASON=.
enum class Reason { crash, request, watchdog, convert };
std::string_view to_string(Reason r);

}  // namespace xendump::format
