#include "kdump/heads.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <ctime>

namespace xendump::kdump {

namespace {

void copy_field(char* field, size_t size, std::string_view value) {
    std::memcpy(field, value.data(), std::min(size - 1, value.size()));
}

constexpr std::string_view kHeader = "disk_dump_header", kSub = "kdump_sub_header";
constexpr std::string_view kConst = "the format (xen-dump-core(5))", kNote = "NT_XEN_KDUMP_HEAD",
                           kMapnr = "the bitmaps' highest frame + 1";

#define XD_H(f, src) HeadField{kHeader, #f, offsetof(DiskDumpHeader, f), sizeof(DiskDumpHeader::f), src, false}
#define XD_U(f) \
    HeadField{kHeader, "utsname." #f, offsetof(DiskDumpHeader, utsname) + offsetof(UtsName, f), sizeof(UtsName::f), kNote, true}
#define XD_S(f, src) \
    HeadField{kSub, #f, kBlockSize + offsetof(KdumpSubHeader, f), sizeof(KdumpSubHeader::f), src, false}

constexpr HeadField kFields[] = {
    XD_H(signature, kConst),
    XD_H(header_version, kConst),
    XD_U(sysname),
    XD_U(nodename),
    XD_U(release),
    XD_U(version),
    XD_U(machine),
    XD_U(domainname),
    XD_H(pad, kConst),
    XD_H(tv_sec, "NT_XEN_DOMAIN's TIME"),
    XD_H(tv_usec, kConst),
    XD_H(status, kNote),
    XD_H(block_size, kConst),
    XD_H(sub_hdr_size, kConst),
    XD_H(bitmap_blocks, kMapnr),
    XD_H(max_mapnr, kMapnr),
    XD_H(total_ram_blocks, kConst),
    XD_H(device_blocks, kConst),
    XD_H(written_blocks, kConst),
    XD_H(current_cpu, kConst),
    XD_H(nr_cpus, "the vcpu contexts (NT_XEN_PRSTATUS)"),
    HeadField{kHeader, "(rest of block 0)", sizeof(DiskDumpHeader), kBlockSize - sizeof(DiskDumpHeader), kConst, false},
    XD_S(phys_base, "VMCOREINFO's NUMBER(phys_base)"),
    XD_S(dump_level, kNote),
    XD_S(split, kConst),
    XD_S(start_pfn, kConst),
    XD_S(end_pfn, kMapnr),
    XD_S(offset_vmcoreinfo, "the VMCOREINFO note"),
    XD_S(size_vmcoreinfo, "the VMCOREINFO note"),
    XD_S(offset_note, "the end of the page data"),
    XD_S(size_note, "the end of the file"),
    XD_S(offset_eraseinfo, kConst),
    XD_S(size_eraseinfo, kConst),
    XD_S(start_pfn_64, kConst),
    XD_S(end_pfn_64, kMapnr),
    XD_S(max_mapnr_64, kMapnr),
    HeadField{kSub, "(rest of the sub header block)", kBlockSize + sizeof(KdumpSubHeader),
              kBlockSize - sizeof(KdumpSubHeader), kConst, false},
};

#undef XD_H
#undef XD_U
#undef XD_S

// The table covers both blocks, every byte once.
constexpr bool covers_both_blocks() {
    uint32_t at = 0;
    for (const HeadField& f : kFields) {
        if (f.offset != at) return false;
        at += f.size;
    }
    return at == 2 * kBlockSize;
}
static_assert(covers_both_blocks());

}  // namespace

std::span<const HeadField> head_fields() { return kFields; }

Heads make_heads(const HeadFacts& f) {
    Heads h;
    auto& d = h.header;
    std::memcpy(d.signature, kSignature.data(), sizeof d.signature);
    d.header_version = kHeaderVersion;
    d.utsname = f.recorded.utsname;
    d.tv_sec = f.time;
    d.status = f.recorded.status;
    d.block_size = kBlockSize;
    d.sub_hdr_size = 1;
    d.bitmap_blocks = static_cast<uint32_t>(bitmap_blocks_for(f.max_mapnr));
    d.max_mapnr = static_cast<uint32_t>(std::min<uint64_t>(f.max_mapnr, UINT32_MAX));
    d.nr_cpus = static_cast<int32_t>(f.nr_cpus);
    auto& s = h.sub;
    s.phys_base = f.phys_base;
    s.dump_level = f.recorded.dump_level;
    s.end_pfn = s.end_pfn_64 = s.max_mapnr_64 = f.max_mapnr;
    s.offset_vmcoreinfo = f.offset_vmcoreinfo;
    s.size_vmcoreinfo = f.size_vmcoreinfo;
    s.offset_note = f.offset_note;
    s.size_note = f.size_note;
    return h;
}

std::vector<std::byte> head_blocks(const Heads& h) {
    std::vector<std::byte> b(2 * kBlockSize);
    std::memcpy(b.data(), &h.header, sizeof h.header);
    std::memcpy(b.data() + kBlockSize, &h.sub, sizeof h.sub);
    return b;
}

int64_t dump_time(const KeyValues& domain) {
    auto t = domain.get(keys::kTime);
    if (!t) return 0;
    std::tm tm{};
    const char* end = strptime(t->c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (!end || *end) return 0;
    return static_cast<int64_t>(timegm(&tm));
}

UtsName fallback_utsname(unsigned guest_width, const kernel::Vmcoreinfo* info) {
    UtsName u{};
    copy_field(u.sysname, sizeof u.sysname, "Linux");
    copy_field(u.machine, sizeof u.machine, guest_width == 4 ? "i686" : "x86_64");
    if (info) copy_field(u.release, sizeof u.release, info->release());
    return u;
}

}  // namespace xendump::kdump
