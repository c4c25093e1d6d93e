// makedumpfile's compressed kdump file ("diskdump" format, header version 6)
// as types: facts from makedumpfile's diskdump_mod.h and crash's and
// libkdumpfile's readers, x86_64 layout (little-endian, 8-byte longs).
//
//   block 0                 DiskDumpHeader
//   block 1 .. sub_hdr_size KdumpSubHeader (the rest of the blocks zeros)
//   bitmap_blocks blocks    1st bitmap (pages that exist), 2nd bitmap (pages
//                           stored), each half of them; bit i&7 of byte i>>3
//                           is pfn i
//   then                    one PageDesc per stored page, ascending pfn
//   then                    page data at the descriptors' offsets
//   anywhere                the ELF note area (offset_note, size_note), with
//                           the VMCOREINFO note's descriptor inside it
//                           (offset_vmcoreinfo, size_vmcoreinfo)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace xendump::kdump {

inline constexpr std::string_view kSignature = "KDUMP   ";  // 8 bytes, no NUL
inline constexpr int32_t kHeaderVersion = 6;                // sub header has the 64-bit pfns
inline constexpr uint32_t kBlockSize = 4096;                // = the page size

// Page compression flags (PageDesc::flags; DiskDumpHeader::status names the
// dump's algorithm). lz4 has no makedumpfile flag: 0x40 is this project's.
inline constexpr uint32_t kFlagZlib = 0x1;
inline constexpr uint32_t kFlagLzo = 0x2;
inline constexpr uint32_t kFlagSnappy = 0x4;
inline constexpr uint32_t kFlagIncomplete = 0x8;  // status only
inline constexpr uint32_t kFlagZstd = 0x20;
inline constexpr uint32_t kFlagLz4 = 0x40;

// struct new_utsname: six 65-byte fields.
struct UtsName {
    char sysname[65];
    char nodename[65];
    char release[65];
    char version[65];
    char machine[65];
    char domainname[65];
};
static_assert(sizeof(UtsName) == 390);

struct DiskDumpHeader {
    char signature[8];
    int32_t header_version;
    UtsName utsname;
    char pad[6];  // alignment of the timeval
    int64_t tv_sec;
    int64_t tv_usec;
    uint32_t status;
    int32_t block_size;
    int32_t sub_hdr_size;      // blocks
    uint32_t bitmap_blocks;    // both bitmaps
    uint32_t max_mapnr;        // 32-bit copy; max_mapnr_64 is the real one
    uint32_t total_ram_blocks;
    uint32_t device_blocks;
    uint32_t written_blocks;
    uint32_t current_cpu;
    int32_t nr_cpus;
};
static_assert(sizeof(DiskDumpHeader) == 464);
static_assert(offsetof(DiskDumpHeader, tv_sec) == 408);
static_assert(offsetof(DiskDumpHeader, status) == 424);

struct KdumpSubHeader {
    uint64_t phys_base;
    int32_t dump_level;
    int32_t split;
    uint64_t start_pfn;
    uint64_t end_pfn;
    uint64_t offset_vmcoreinfo;
    uint64_t size_vmcoreinfo;
    uint64_t offset_note;
    uint64_t size_note;
    uint64_t offset_eraseinfo;
    uint64_t size_eraseinfo;
    uint64_t start_pfn_64;
    uint64_t end_pfn_64;
    uint64_t max_mapnr_64;
};
static_assert(sizeof(KdumpSubHeader) == 104);

struct PageDesc {
    uint64_t offset;  // of the page's data
    uint32_t size;    // bytes stored: < block size compressed, = block size raw
    uint32_t flags;   // one compression flag, or 0 for a raw page
    uint64_t page_flags;
};
static_assert(sizeof(PageDesc) == 24);

inline bool test_bit(const std::byte* bitmap, uint64_t pfn) {
    return (std::to_integer<unsigned>(bitmap[pfn >> 3]) >> (pfn & 7)) & 1;
}
inline void set_bit(std::byte* bitmap, uint64_t pfn) { bitmap[pfn >> 3] |= std::byte(1u << (pfn & 7)); }

}  // namespace xendump::kdump
