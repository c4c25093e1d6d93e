// Issue 18 item 2: the compact (kdump) format. Dumps of simulated PV, PVH
// and HVM guests written as compressed kdump files and read back page by
// page through DumpReader; the same bytes whatever the number of threads;
// pages that do not shrink stored raw; verify catching a flipped bit in a
// compressed page, a truncated file and hostile headers.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>

#include "dump_support.hpp"
#include "mixed_pages.hpp"
#include "kdump/codec.hpp"
#include "kdump/format.hpp"
#include "kdump/kdump_file.hpp"
#include "kdump/write_kdump.hpp"
#include "reader/digest_table.hpp"
#include "reader/dump_file.hpp"
#include "xendump/convert.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/kdump.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
using dump::json;

std::string read_file(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

json holey_extents(uint64_t base_mfn) {
    return json::array({json::array({0, base_mfn, 160}), json::array({256, base_mfn + 1000, 3000}),
                        json::array({3300, base_mfn + 5000, 1}), json::array({3302, base_mfn + 6000, 700})});
}

struct Case {
    std::string name;
    json domain;
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

std::vector<Case> cases() {
    return {
        {"pv64", dump::pv_domain(7, 8, "tree", 4200, holey_extents(0x100000))},
        {"pv32", dump::pv_domain(8, 4, "linear", 4200, holey_extents(0x50000))},
        {"hvm", dump::hvm_domain(12, "hvm", 0x1800,
                                 json::array({json::array({0, 0x400000, 0xA0}), json::array({0xC0, 0x4000C0, 0x1000}),
                                              json::array({0x1400, 0x401400, 0x400})}))},
        {"pvh", dump::hvm_domain(13, "pvh", 0x1800,
                                 json::array({json::array({0, 0x500000, 0x800}), json::array({0x1000, 0x501000, 0x800})}))},
    };
}

class KdumpGuest : public ::testing::TestWithParam<Case> {};

TEST_P(KdumpGuest, EveryPageEqualsTheGuest) {
    const Case& c = GetParam();
    sim::Host host(dump::host_spec({c.domain}));
    const uint32_t domid = c.domain.at("domid");
    const auto expected = dump::expected_pages(c.domain);
    TempDir out;
    const fs::path path = out / "guest.kdump";
    DumpOptions opt;
    opt.kdump = true;
    DumpResult res = dump_domain_to_file(*host.hv, domid, path, opt);
    EXPECT_EQ(res.nr_pages, expected.size());
    const bool pv = c.domain.at("type") == "pv";
    dump::check_dump_against_host(path, host, domid, expected, pv);
    DumpReader r = DumpReader::open(path);
    EXPECT_EQ(r.format(), FileFormat::kdump);
    EXPECT_EQ(r.type(), format::guest_type_from_string(c.domain.at("type").get<std::string>()));
    EXPECT_EQ(r.guest_width(), c.domain.value("guest_width", 8u));
    EXPECT_EQ(r.domain().get(keys::kDomid), std::to_string(domid));
    EXPECT_TRUE(r.has_digests());
}

INSTANTIATE_TEST_SUITE_P(Types, KdumpGuest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// A compact dump to a pipe is makedumpfile's flattened stream (issue 34
// item 6): read as it is, it is the guest; a flattened v1 dump is refused.
TEST(Kdump, PipeGetsTheFlattenedStream) {
    json dom = dump::pv_domain(7, 8, "tree", 4200, holey_extents(0x100000));
    sim::Host host(dump::host_spec({dom}));
    DumpOptions opt;
    opt.kdump = true;
    const std::vector<std::byte> bytes = through_pipe([&](int fd) { dump_domain_to_fd(*host.hv, 7, fd, false, opt); });
    ASSERT_GT(bytes.size(), 4096u);
    EXPECT_EQ(0, std::memcmp(bytes.data(), "makedumpfile\0\0\0\0", 16));
    TempDir dir;
    const fs::path p = dir / "a.flat";
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                             static_cast<std::streamsize>(bytes.size()));
    dump::check_dump_against_host(p, host, 7, dump::expected_pages(dom), true);
    EXPECT_TRUE(DumpReader::open(p).flattened().has_value());
    DumpOptions v1;
    v1.flattened = true;
    EXPECT_THROW(dump_domain_to_file(*host.hv, 7, dir / "v1.flat", v1), Error);
}

// A guest of compressible, incompressible and zero pages, with holes.
std::vector<PageEntry> mixed_entries() {
    std::vector<PageEntry> list;
    for (uint64_t pfn = 0; pfn < 3000; ++pfn)
        if (pfn % 700 != 5) list.push_back({pfn, pfn});
    return list;
}

struct MixedGuest : MixedSource {
    MixedGuest() : MixedSource(mixed_entries()) {}
};

DumpSpec mixed_spec(format::GuestType type = format::GuestType::hvm) {
    DumpSpec spec;
    spec.type = type;
    spec.domain.set(keys::kDomid, "3");
    spec.domain.set(keys::kName, "mixed");
    spec.domain.set(keys::kType, std::string(format::to_string(type)));
    spec.domain.set(keys::kTime, "2025-06-01T10:15:00Z");
    spec.vcpus.push_back({0, std::vector<std::byte>(format::kVcpuContextSize64, std::byte{7})});
    spec.vmcoreinfo =
        "OSRELEASE=6.1.0-test\nPAGESIZE=4096\nSYMBOL(swapper_pg_dir)=ffffffff8260a000\nNUMBER(phys_base)=16777216\n";
    return spec;
}

TEST(Kdump, SameBytesWhateverTheThreadCountForEveryAlgorithm) {
    TempDir dir;
    for (Compression c : {Compression::zstd, Compression::lz4, Compression::lzo, Compression::zlib, Compression::none}) {
        SCOPED_TRACE(std::string(to_string(c)));
        std::string first;
        for (unsigned threads : {1u, 3u}) {
            MixedGuest src;
            const fs::path p = dir / (std::string(to_string(c)) + std::to_string(threads));
            write_kdump_file(p, mixed_spec(), src, test::kdump_options(c, threads));
            const std::string bytes = read_file(p);
            if (first.empty())
                first = bytes;
            else
                EXPECT_TRUE(bytes == first) << "threads change the output";
            DumpReader r = DumpReader::open(p);
            EXPECT_TRUE(r.verify().empty());
            MixedGuest want;
            std::vector<std::byte> a(4096), b(4096);
            std::vector<uint8_t> un(1);
            ASSERT_EQ(r.nr_pages(), want.list.size());
            for (size_t i = 0; i < want.list.size(); ++i) {
                want.read_pages(i, 1, a, un);
                ASSERT_TRUE(r.read_page_by_pfn(want.list[i].pfn, b));
                ASSERT_EQ(0, std::memcmp(a.data(), b.data(), 4096)) << "pfn " << want.list[i].pfn;
            }
            EXPECT_FALSE(r.read_page_by_pfn(5, b));     // a hole
            EXPECT_FALSE(r.read_page_by_pfn(3000, b));  // past the end
        }
    }
}

TEST(Kdump, HeaderFollowsMakedumpfile) {
    TempDir dir;
    MixedGuest src;
    const fs::path p = dir / "k";
    write_kdump_file(p, mixed_spec(), src, test::kdump_options(Compression::zstd, 2));
    auto f = std::make_shared<reader::DumpFile>(p.string());
    kdump::KdumpFile k(f);
    EXPECT_EQ(std::string(k.header().signature, 8), "KDUMP   ");
    EXPECT_EQ(k.header().header_version, 6);
    EXPECT_EQ(k.header().block_size, 4096);
    EXPECT_EQ(k.header().status, kdump::kFlagZstd);
    EXPECT_EQ(k.header().nr_cpus, 1);
    EXPECT_EQ(k.header().tv_sec, 1748772900);
    EXPECT_STREQ(k.header().utsname.machine, "x86_64");
    EXPECT_STREQ(k.header().utsname.release, "6.1.0-test");
    EXPECT_EQ(k.sub_header().max_mapnr_64, 3000u);
    EXPECT_EQ(k.sub_header().phys_base, 16777216u);
    // The VMCOREINFO text is where the sub header says, inside the note area.
    std::string text(k.sub_header().size_vmcoreinfo, '\0');
    f->read_exact(k.sub_header().offset_vmcoreinfo, std::as_writable_bytes(std::span(text)), "vmcoreinfo");
    EXPECT_EQ(text, *mixed_spec().vmcoreinfo);
    // Zero pages share one raw page; random pages are stored raw; patterns compressed.
    uint64_t zero_offset = 0;
    for (uint64_t i = 0; i < k.stored_pages(); ++i) {
        const uint64_t pfn = k.stored_bitmap().select(i);
        const kdump::PageDesc d = k.descriptor(i);
        if (pfn % 3 == 0) {
            if (!zero_offset) zero_offset = d.offset;
            EXPECT_EQ(d.offset, zero_offset);
            EXPECT_EQ(d.size, 4096u);
            EXPECT_EQ(d.flags, 0u);
        } else if (pfn % 3 == 1) {
            EXPECT_EQ(d.size, 4096u) << "pfn " << pfn;
            EXPECT_EQ(d.flags, 0u) << "pfn " << pfn;
        } else {
            EXPECT_LT(d.size, 4096u) << "pfn " << pfn;
            EXPECT_EQ(d.flags, kdump::kFlagZstd) << "pfn " << pfn;
        }
    }
    EXPECT_TRUE(k.present_bitmap().test(4));
    EXPECT_FALSE(k.present_bitmap().test(5));
}

// The probe before compression (kdump/codec.hpp looks_incompressible):
// random pages are stored raw, mostly without a try (a random page whose
// sample shows fewer values is tried and does not shrink); text, a table
// of kernel pointers after random bytes, and zeros are compressed by every
// algorithm.
TEST(KdumpCodec, RandomPagesAreStoredRawTextAndTablesAreCompressed) {
    const std::array algorithms{Compression::zstd, Compression::lz4, Compression::lzo, Compression::zlib};
    std::mt19937_64 rng(42);
    std::vector<std::byte> page(4096), out(8192);
    auto randomize = [&](size_t from, size_t to) {
        for (size_t i = from; i < to; i += 8) {
            const uint64_t w = rng();
            std::memcpy(page.data() + i, &w, 8);
        }
    };
    std::vector<std::unique_ptr<kdump::PageCompressor>> compressors;
    for (Compression c : algorithms) compressors.push_back(std::make_unique<kdump::PageCompressor>(c));
    int flagged = 0;
    for (int k = 0; k < 1000; ++k) {
        randomize(0, 4096);
        flagged += kdump::looks_incompressible(page);
        for (auto& c : compressors) ASSERT_EQ(c->compress(page, out).size, 0u) << "random page " << k;
    }
    EXPECT_GE(flagged, 950) << "of 1000 random pages";

    auto compressed_by_all = [&](const char* what) {
        SCOPED_TRACE(what);
        EXPECT_FALSE(kdump::looks_incompressible(page));
        for (size_t a = 0; a < algorithms.size(); ++a) {
            const size_t n = compressors[a]->compress(page, out).size;
            EXPECT_GT(n, 0u) << to_string(algorithms[a]);
            EXPECT_LT(n, 4096u) << to_string(algorithms[a]);
        }
    };
    std::string text;
    for (unsigned n = 0; text.size() < 4096; ++n)
        text += "SYMBOL(sym" + std::to_string(n * 7919 % 1000) + ")=ffffffff8" + std::to_string(1000000 + n * 104729) +
                "\nOFFSET(page.flags)=" + std::to_string(n % 64) + "\n";
    std::memcpy(page.data(), text.data(), 4096);
    compressed_by_all("text");
    randomize(0, 2048);
    for (size_t i = 2048; i < 4096; i += 8) {
        const uint64_t pointer = 0xffff888004000000ull + rng() % 4096 * 64;
        std::memcpy(page.data() + i, &pointer, 8);
    }
    compressed_by_all("random bytes, then kernel pointers");
    std::fill(page.begin(), page.end(), std::byte{0});
    compressed_by_all("zeros");
}

// The digests are of the uncompressed pages: a flipped bit in a compressed
// page is caught, named with the file offset of the page.
// zstd's second step on pages of code (kdump/codec.cpp): deflate, stored in
// zlib's format and flagged zlib, where it is smaller than zstd's level 1.
// The pages of this test's own executable are machine code and tables; each
// comes back whole through the decompressor of its own flag.
TEST(KdumpCodec, ZstdStoresCodePagesAsDeflateWhereThatIsSmaller) {
    std::ifstream exe("/proc/self/exe", std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(exe)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 64u * 4096);
    kdump::PageCompressor zstd(Compression::zstd);
    kdump::PageDecompressor back;
    std::vector<std::byte> out(kdump::compress_bound(Compression::zstd, 4096)), page(4096), again(4096);
    size_t as_zlib = 0, as_zstd = 0, raw = 0;
    for (size_t at = 0; at + 4096 <= bytes.size(); at += 4096) {
        std::memcpy(page.data(), bytes.data() + at, 4096);
        const kdump::CompressedPage c = zstd.compress(page, out);
        if (c.size == 0) {
            EXPECT_EQ(c.flag, 0u);
            ++raw;
            continue;
        }
        ASSERT_LT(c.size, 4096u);
        ASSERT_TRUE(c.flag == kdump::kFlagZstd || c.flag == kdump::kFlagZlib) << c.flag;
        (c.flag == kdump::kFlagZlib ? as_zlib : as_zstd) += 1;
        EXPECT_EQ(back.decompress(c.flag, std::span(out).first(c.size), again), "") << "page at " << at;
        ASSERT_EQ(again, page) << "page at " << at;
    }
    EXPECT_GT(as_zlib, 10u) << "of " << bytes.size() / 4096 << " pages (" << as_zstd << " zstd, " << raw << " raw)";
    EXPECT_GT(as_zstd, 10u);
}

TEST(Kdump, VerifyCatchesAFlippedBitInACompressedPage) {
    TempDir dir;
    MixedGuest src;
    const fs::path p = dir / "k";
    write_kdump_file(p, mixed_spec(), src, test::kdump_options(Compression::zstd, 2));
    uint64_t at = 0;
    {
        kdump::KdumpFile k(std::make_shared<reader::DumpFile>(p.string()));
        uint64_t i = 1000;
        while (k.descriptor(i).flags != kdump::kFlagZstd) ++i;
        const kdump::PageDesc d = k.descriptor(i);
        at = d.offset + d.size / 2;
    }
    ASSERT_TRUE(DumpReader::verify_file(p).empty());
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char byte = 0;
    f.read(&byte, 1);
    byte ^= 0x10;
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&byte, 1);
    f.close();
    const auto findings = DumpReader::verify_file(p);
    ASSERT_FALSE(findings.empty());
    bool named = false;
    for (const auto& x : findings) {
        if (x.check == "digest-mismatch" || x.check == "kdump-page") named = true;
        EXPECT_FALSE(x.message.empty());
    }
    EXPECT_TRUE(named) << findings[0].check << ": " << findings[0].message;
}

TEST(Kdump, VerifyNamesTheFileAndOffsetOfATruncatedFile) {
    TempDir dir;
    MixedGuest src;
    const fs::path p = dir / "k";
    write_kdump_file(p, mixed_spec(), src, test::kdump_options(Compression::lz4, 2));
    const auto size = fs::file_size(p);
    fs::resize_file(p, size - 100);
    const auto findings = DumpReader::verify_file(p);
    ASSERT_EQ(findings.size(), 1u);
    EXPECT_EQ(findings[0].check, "kdump-notes");
    EXPECT_NE(findings[0].message.find("past the end of the file"), std::string::npos) << findings[0].message;
    try {
        DumpReader::open(p);
        FAIL() << "a truncated file opened";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
        EXPECT_TRUE(e.offset().has_value());
    }
    // Cut inside the page data: the pages past the end are named.
    fs::resize_file(p, 2 * 4096 + 4096 * 2 + 3000 * 24 + 8192);
    EXPECT_FALSE(DumpReader::verify_file(p).empty());
}

TEST(Kdump, HostileHeadersAreRefusedWithTheirOffset) {
    TempDir dir;
    MixedGuest src;
    const fs::path good = dir / "k";
    write_kdump_file(good, mixed_spec(), src, test::kdump_options(Compression::zlib, 1));
    const std::string bytes = read_file(good);
    struct Edit {
        size_t at;
        uint64_t value;
        size_t width;
        std::string check;
    };
    const std::vector<Edit> edits = {
        {offsetof(kdump::DiskDumpHeader, block_size), 512, 4, "kdump-header"},
        {offsetof(kdump::DiskDumpHeader, bitmap_blocks), 0xfffffffe, 4, "kdump-bitmap"},
        {offsetof(kdump::DiskDumpHeader, sub_hdr_size), 0x7fffffff, 4, "kdump-header"},
        {4096 + offsetof(kdump::KdumpSubHeader, max_mapnr_64), ~0ull, 8, "kdump-bitmap"},
        {4096 + offsetof(kdump::KdumpSubHeader, offset_note), ~0ull - 10, 8, "kdump-notes"},
        {4096 + offsetof(kdump::KdumpSubHeader, size_note), 1ull << 40, 8, "kdump-notes"},
    };
    for (const auto& e : edits) {
        std::string copy = bytes;
        std::memcpy(copy.data() + e.at, &e.value, e.width);
        const fs::path p = dir / "bad";
        std::ofstream(p, std::ios::binary | std::ios::trunc).write(copy.data(), static_cast<std::streamsize>(copy.size()));
        const auto findings = DumpReader::verify_file(p);
        ASSERT_EQ(findings.size(), 1u) << e.check;
        EXPECT_EQ(findings[0].check, e.check) << findings[0].message;
    }
}

// Issue 32 item 2: every field of block 0 and of the sub header, and both
// bitmaps, changed in a compact file of each compression: verify names the
// field (or bitmap) and its offset. The fields come from format.hpp's
// structs here, not from the library's table.
struct HeadByte {
    std::string name;
    uint64_t offset;
    size_t size;
};

std::vector<HeadByte> every_head_field() {
    using H = kdump::DiskDumpHeader;
    using S = kdump::KdumpSubHeader;
    std::vector<HeadByte> f;
#define XD_H(m) f.push_back({#m, offsetof(H, m), sizeof(H::m)})
#define XD_U(m) f.push_back({"utsname." #m, offsetof(H, utsname) + offsetof(kdump::UtsName, m), sizeof(kdump::UtsName::m)})
#define XD_S(m) f.push_back({#m, 4096 + offsetof(S, m), sizeof(S::m)})
    XD_H(signature); XD_H(header_version);
    XD_U(sysname); XD_U(nodename); XD_U(release); XD_U(version); XD_U(machine); XD_U(domainname);
    XD_H(pad); XD_H(tv_sec); XD_H(tv_usec); XD_H(status); XD_H(block_size); XD_H(sub_hdr_size);
    XD_H(bitmap_blocks); XD_H(max_mapnr); XD_H(total_ram_blocks); XD_H(device_blocks); XD_H(written_blocks);
    XD_H(current_cpu); XD_H(nr_cpus);
    f.push_back({"rest of block 0", sizeof(H), 4096 - sizeof(H)});
    XD_S(phys_base); XD_S(dump_level); XD_S(split); XD_S(start_pfn); XD_S(end_pfn); XD_S(offset_vmcoreinfo);
    XD_S(size_vmcoreinfo); XD_S(offset_note); XD_S(size_note); XD_S(offset_eraseinfo); XD_S(size_eraseinfo);
    XD_S(start_pfn_64); XD_S(end_pfn_64); XD_S(max_mapnr_64);
    f.push_back({"rest of the sub header block", 4096 + sizeof(S), 4096 - sizeof(S)});
#undef XD_H
#undef XD_U
#undef XD_S
    uint64_t at = 0;
    for (const auto& x : f) {
        EXPECT_EQ(x.offset, at) << x.name;
        at += x.size;
    }
    EXPECT_EQ(at, 8192u);
    return f;
}

struct Mutation {
    std::string name;  // the field or bitmap verify must name
    uint64_t at;       // byte changed
    uint8_t mask;      // xor
    uint64_t lo, hi;   // a finding's offset names it when in [lo, hi)
};

// What verify says about `bytes` with `m` applied, and whether a finding names it.
struct Outcome {
    bool ok = false, named = false;
    std::string said;
};

Outcome verify_mutated(const fs::path& p, std::string bytes, const Mutation& m) {
    bytes[m.at] = static_cast<char>(bytes[m.at] ^ m.mask);
    std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    Outcome o;
    const auto findings = DumpReader::verify_file(p);
    o.ok = findings.empty();
    for (const auto& f : findings) {
        o.said += "\n  " + f.check + " " + f.structure + " @" + std::to_string(f.offset) + ": " + f.message;
        if (f.offset >= m.lo && f.offset < m.hi &&
            (f.structure + " " + f.message).find(m.name) != std::string::npos)
            o.named = true;
    }
    return o;
}

std::vector<Mutation> head_mutations(const std::string& bytes) {
    std::vector<Mutation> ms;
    for (const auto& f : every_head_field()) {
        ms.push_back({f.name, f.offset, 0x01, f.offset, f.offset + 1});
        ms.push_back({f.name, f.offset + f.size - 1, 0x80, f.offset, f.offset + 1});
    }
    // Both bitmaps: a hole's bit set, a page's bit cleared, a bit set past
    // max_mapnr (the bitmaps are whole blocks).
    kdump::DiskDumpHeader h;
    std::memcpy(&h, bytes.data(), sizeof h);
    const uint64_t each = uint64_t{h.bitmap_blocks} / 2 * 4096, first = 2 * 4096;
    for (int i = 0; i < 2; ++i) {
        const std::string name = i == 0 ? "1st bitmap" : "2nd bitmap";
        const uint64_t lo = first + i * each;
        ms.push_back({name, lo + 5 / 8, uint8_t(1u << (5 % 8)), lo, lo + each});      // pfn 5: a hole
        ms.push_back({name, lo + 4 / 8, uint8_t(1u << (4 % 8)), lo, lo + each});      // pfn 4: a page
        ms.push_back({name, lo + 2999 / 8, uint8_t(1u << (2999 % 8)), lo, lo + each});  // the last page
        ms.push_back({name, lo + each - 1, 0x80, lo, lo + each});                      // past max_mapnr
    }
    return ms;
}

TEST(KdumpHeads, VerifyNamesEveryChangedFieldOfTheHeadersAndBitmaps) {
    TempDir dir;
    size_t total = 0, verified_ok = 0, named = 0;
    for (Compression c : {Compression::zstd, Compression::lz4, Compression::lzo, Compression::zlib, Compression::none}) {
        SCOPED_TRACE(std::string(to_string(c)));
        MixedGuest src;
        const fs::path good = dir / (std::string(to_string(c)) + ".kdump"), bad = dir / "bad";
        write_kdump_file(good, mixed_spec(), src, test::kdump_options(c, 1));
        for (const auto& f : DumpReader::verify_file(good))
            ADD_FAILURE() << "the file as written: " << f.check << " " << f.structure << " @" << f.offset << ": "
                          << f.message;
        const std::string bytes = read_file(good);
        for (const Mutation& m : head_mutations(bytes)) {
            const Outcome o = verify_mutated(bad, bytes, m);
            ++total;
            verified_ok += o.ok;
            named += o.named;
            EXPECT_TRUE(o.named) << m.name << ": byte " << m.at << " ^ " << int(m.mask)
                                 << (o.ok ? " verified OK" : " not named:" + o.said);
        }
    }
    std::cout << "[ measured ] " << total << " header and bitmap changes: " << verified_ok << " verified OK, " << named
              << " named with their offset\n";
}

// A compact file written before NT_XEN_KDUMP_HEAD (kept as it was written
// then: fuzz/corpus/kdump/hvm-zstd-before-head-note.kdump) still verifies,
// and what its other notes give is still checked.
TEST(KdumpHeads, AFileWrittenBeforeTheHeadNoteVerifiesAndItsHeaderIsChecked) {
    const fs::path seed = source_root() / "fuzz" / "corpus" / "kdump" / "hvm-zstd-before-head-note.kdump";
    {
        kdump::KdumpFile k(std::make_shared<reader::DumpFile>(seed.string()));
        ASSERT_EQ(k.notes().find(format::kNameXenCore, 15 /* NT_XEN_KDUMP_HEAD */), nullptr) << "the seed has the head note";
    }
    for (const auto& f : DumpReader::verify_file(seed))
        ADD_FAILURE() << f.check << " " << f.structure << " @" << f.offset << ": " << f.message;
    TempDir dir;
    const std::string bytes = read_file(seed);
    for (const auto& f : every_head_field()) {
        if (f.name != "phys_base" && f.name != "offset_vmcoreinfo" && f.name != "tv_sec" && f.name != "end_pfn") continue;
        const Outcome o = verify_mutated(dir / "bad", bytes, {f.name, f.offset, 0x01, f.offset, f.offset + 1});
        EXPECT_TRUE(o.named) << f.name << (o.ok ? " verified OK" : " not named:" + o.said);
    }
}

TEST(Kdump, UnreadablePagesAreListedAndStoredAsZeros) {
    TempDir dir;
    PatternPageSource src({{1, 1}, {2, 2}, {3, 3}, {9, 9}});
    src.unreadable_pfns = {2};
    const fs::path p = dir / "k";
    write_kdump_file(p, mixed_spec(), src, test::kdump_options(Compression::lzo, 2));
    DumpReader r = DumpReader::open(p);
    EXPECT_EQ(r.unreadable_pfns(), std::vector<uint64_t>{2});
    std::vector<std::byte> page(4096, std::byte{1});
    ASSERT_TRUE(r.read_page_by_pfn(2, page));
    EXPECT_TRUE(std::all_of(page.begin(), page.end(), [](std::byte b) { return b == std::byte{0}; }));
    EXPECT_TRUE(r.verify().empty());
}

TEST(Kdump, WithoutDigestsVerifyNeedsAllowNoDigests) {
    TempDir dir;
    MixedGuest src;
    const fs::path p = dir / "k";
    KdumpOptions o;
    o.write.digests = false;
    write_kdump_file(p, mixed_spec(), src, o);
    const auto rep = DumpReader::verify_file_report(p);
    EXPECT_EQ(rep.digests, DigestCheck::absent);
    ASSERT_EQ(rep.findings.size(), 1u);
    EXPECT_EQ(rep.findings[0].check, "digests-absent");
    VerifyOptions allow;
    allow.allow_no_digests = true;
    EXPECT_TRUE(DumpReader::verify_file(p, allow).empty());
}

// The compact file `p` of MixedSource(list) verifies, and reads back every
// page by pfn and by gmfn.
void expect_pages_by_pfn_and_gmfn(const fs::path& p, const std::vector<PageEntry>& list) {
    DumpReader r = DumpReader::open(p);
    EXPECT_TRUE(r.verify().empty());
    std::vector<std::byte> want(4096), got(4096);
    for (const auto& e : list) {
        fill_mixed_page(e.pfn, want.data());
        ASSERT_TRUE(r.read_page_by_pfn(e.pfn, got));
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), 4096)) << "pfn " << e.pfn;
        ASSERT_TRUE(r.read_page_by_gmfn(e.gmfn, got));
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), 4096)) << "gmfn " << e.gmfn;
    }
}

// A PV guest's pages are filed by machine frame (crash reads the file as a
// Xen dom0's kdump file); frames that fall as the pfns rise take the
// scattered descriptor path, and the pages still read back by pfn and gmfn.
TEST(Kdump, PvPagesAreFiledByMachineFrame) {
    std::vector<PageEntry> list;
    for (uint64_t pfn = 0; pfn < 700; ++pfn) list.push_back({pfn, 0x90000 - 2 * pfn});
    MixedSource src(list);
    DumpSpec spec = mixed_spec(format::GuestType::pv);
    std::vector<std::byte> shared(format::kSharedInfoSize);
    const uint64_t frame_list_list = 0x12345;
    std::memcpy(shared.data() + 3088 + 8, &frame_list_list, 8);  // arch.pfn_to_mfn_frame_list_list
    spec.shared_info = shared;
    TempDir dir;
    const fs::path p = dir / "pv";
    write_kdump_file(p, spec, src, test::kdump_options(Compression::zstd, 2));

    kdump::KdumpFile k(std::make_shared<reader::DumpFile>(p.string()));
    ASSERT_EQ(k.stored_pages(), list.size());
    EXPECT_EQ(k.stored_bitmap().select(0), 0x90000 - 2 * 699);  // the bitmap holds machine frames
    EXPECT_EQ(k.sub_header().max_mapnr_64, 0x90001u);
    const reader::Note* info = k.notes().find("Xen", 0x1000001);
    ASSERT_NE(info, nullptr);
    uint64_t last = 0;
    std::memcpy(&last, info->desc.data() + info->desc.size() - 8, 8);
    EXPECT_EQ(last, frame_list_list);

    expect_pages_by_pfn_and_gmfn(p, list);
    DumpReader r = DumpReader::open(p);
    std::vector<std::byte> got(4096);
    EXPECT_FALSE(r.read_page_by_pfn(700, got));
}

// Issue 19: the digest note (16 bytes a 256-page chunk, 16 MiB for a 1 TiB
// guest) is left in the file at open, as the PV table is, and read by
// verify through a window of stored digests that moves as it is asked.
TEST(Kdump, DigestsStayOnDiskAndAreReadInWindows) {
    std::vector<PageEntry> list;
    for (uint64_t pfn = 0; pfn < 1300; ++pfn) list.push_back({pfn, pfn});
    MixedSource src(list);
    TempDir dir;
    const fs::path p = dir / "hvm";
    write_kdump_file(p, mixed_spec(format::GuestType::hvm), src, test::kdump_options(Compression::zstd, 1));

    const auto file = std::make_shared<reader::DumpFile>(p.string());
    kdump::KdumpFile k(file);
    const reader::Note* note = k.notes().find("XEN CORE", format::kNtXenDigest);
    ASSERT_NE(note, nullptr);
    EXPECT_TRUE(note->desc.empty()) << "the digest note was read at open";
    const uint64_t chunks = (list.size() + 255) / 256;  // 6, then the notes' and the table's
    ASSERT_EQ(note->desc_size, sizeof(format::DigestDescHead) + 16 * (chunks + 2));

    reader::DigestTable table(*file, *note, 3);
    EXPECT_FALSE(table.format_problem(list.size()).has_value());
    EXPECT_EQ(table.chunks(list.size()), chunks);
    EXPECT_TRUE(table.format_problem(list.size() + 256).has_value());  // a chunk short
    const std::string bytes = read_file(p);
    auto stored = [&](uint64_t i) {
        return bytes.substr(static_cast<size_t>(table.offset_of(i)), 16);
    };
    auto got = [&](uint64_t i) {
        const auto c = table.at(i);
        return std::string(reinterpret_cast<const char*>(&c), sizeof c);
    };
    // Forward, back across windows, and the last one (the table's digest).
    for (uint64_t i : {0, 1, 2, 3, 7, 4, 0, 5, 6, 2})
        EXPECT_EQ(got(static_cast<uint64_t>(i)), stored(static_cast<uint64_t>(i))) << "digest " << i;
    EXPECT_THROW(table.at(chunks + 2), Error);
    EXPECT_TRUE(DumpReader::open(p).verify().empty());
}

// Frames that fall as the pfns rise, spread over 24 Mi frames: the bitmaps
// are written 1 MiB (8 Mi frames) at a time, each chunk from a pass over the
// list, the stored one from the frames' ranks; both hold every frame.
TEST(Kdump, PvFramesFallingAcrossBitmapChunks) {
    std::vector<PageEntry> list;
    for (uint64_t pfn = 0; pfn < 96; ++pfn) list.push_back({pfn, 0x1800000 - 1 - pfn * 0x40000});
    MixedSource src(list);
    TempDir dir;
    const fs::path p = dir / "pv";
    write_kdump_file(p, mixed_spec(format::GuestType::pv), src, test::kdump_options(Compression::zstd, 2));

    kdump::KdumpFile k(std::make_shared<reader::DumpFile>(p.string()));
    ASSERT_EQ(k.stored_pages(), list.size());
    ASSERT_EQ(k.present_bitmap().count(), list.size());
    for (uint64_t i = 0; i < list.size(); ++i) {
        const uint64_t frame = list[list.size() - 1 - i].gmfn;  // ascending frames
        EXPECT_EQ(k.stored_bitmap().select(i), frame);
        EXPECT_EQ(k.present_bitmap().select(i), frame);
    }
    expect_pages_by_pfn_and_gmfn(p, list);
}

// Frames in runs that rise or fall by one, the runs scattered over 2^22
// frames (many blocks of the frames' bitmap): each descriptor's slot comes
// from the run's neighbour or from the bitmap in its temporary file, and
// every page reads back by pfn and by gmfn.
TEST(Kdump, PvFramesInShuffledRunsBothWays) {
    std::vector<PageEntry> list;
    constexpr uint64_t kRuns = 32, kRun = 100;
    for (uint64_t r = 0; r < kRuns; ++r) {
        const uint64_t base = (r * 13 % kRuns) * (uint64_t{1} << 17) + 5000;  // 13 is odd: a permutation
        for (uint64_t i = 0; i < kRun; ++i)
            list.push_back({r * kRun + i, r % 2 ? base + kRun - 1 - i : base + i});
    }
    MixedSource src(list);
    TempDir dir;
    const fs::path p = dir / "pv";
    write_kdump_file(p, mixed_spec(format::GuestType::pv), src, test::kdump_options(Compression::zstd, 2));

    kdump::KdumpFile k(std::make_shared<reader::DumpFile>(p.string()));
    ASSERT_EQ(k.stored_pages(), list.size());
    std::vector<uint64_t> frames;
    for (const auto& e : list) frames.push_back(e.gmfn);
    std::sort(frames.begin(), frames.end());
    for (uint64_t i = 0; i < frames.size(); i += 37) {
        EXPECT_EQ(k.stored_bitmap().select(i), frames[i]) << i;
        EXPECT_EQ(k.present_bitmap().select(i), frames[i]) << i;
    }
    expect_pages_by_pfn_and_gmfn(p, list);
    EXPECT_TRUE(DumpReader::open(p).verify().empty());
}

// Two pfns of a PV guest naming one machine frame: refused before a file
// exists, naming both pfns and the frame; also when the frames span several
// chunks of the bitmap (made a chunk at a time) and the shared one is in
// the last of ten.
TEST(Kdump, PvPagesSharingAFrameAreRefused) {
    for (const uint64_t step : {uint64_t{2}, uint64_t{0x40000}}) {
        std::vector<PageEntry> list;
        for (uint64_t pfn = 0; pfn < 300; ++pfn) list.push_back({pfn, 0x4b00000 - step * pfn});
        list[250].gmfn = list[10].gmfn;
        MixedSource src(list);
        TempDir dir;
        const fs::path p = dir / "pv";
        try {
            write_kdump_file(p, mixed_spec(format::GuestType::pv), src, test::kdump_options(Compression::zstd, 1));
            ADD_FAILURE() << "written, frames " << step << " apart";
        } catch (const Error& e) {
            EXPECT_NE(
                std::string(e.what()).find("pfns 10 and 250 share machine frame " + std::to_string(list[10].gmfn)),
                std::string::npos)
                << e.what();
        }
        EXPECT_FALSE(fs::exists(p));
    }
}

// A PV guest's table (the NT_XEN_P2M note, read where it lies) against the
// 2nd bitmap: a frame the bitmap does not store and falling pfns are refused
// at open, a frame named twice is a verify finding; each names the entry's
// offset in the note.
TEST(Kdump, HostilePvTablesAreFoundWithTheirOffset) {
    std::vector<PageEntry> list;
    for (uint64_t pfn = 0; pfn < 700; ++pfn) list.push_back({pfn, 0x90000 - 2 * pfn});
    MixedSource src(list);
    TempDir dir;
    const fs::path good = dir / "pv";
    KdumpOptions o;
    o.write.digests = false;  // the edits are found by the structure, not the table's digest
    write_kdump_file(good, mixed_spec(format::GuestType::pv), src, o);
    uint64_t table = 0;
    {
        kdump::KdumpFile k(std::make_shared<reader::DumpFile>(good.string()));
        const reader::Note* t = k.notes().find("XEN CORE", format::kNtXenP2m);
        ASSERT_NE(t, nullptr);
        EXPECT_TRUE(t->desc.empty());  // left on disk
        table = t->desc_offset;
    }
    const std::string bytes = read_file(good);
    struct Edit {
        const char* what;
        uint64_t entry;
        bool gmfn;         // the entry's gmfn, else its pfn
        uint64_t value;
        bool at_open;      // refused by open, else a verify finding
    };
    const Edit edits[] = {
        {"frame not stored", 5, true, 0x90000 - 1, true},
        {"pfns fall", 5, false, 2, true},
        {"frame named twice", 1, true, 0x90000, false},
    };
    VerifyOptions allow;
    allow.allow_no_digests = true;
    for (const auto& e : edits) {
        SCOPED_TRACE(e.what);
        std::string copy = bytes;
        const uint64_t at = table + e.entry * sizeof(PageEntry) + (e.gmfn ? 8 : 0);
        std::memcpy(copy.data() + at, &e.value, 8);
        const fs::path p = dir / "bad";
        std::ofstream(p, std::ios::binary | std::ios::trunc).write(copy.data(), static_cast<std::streamsize>(copy.size()));
        if (e.at_open) {
            EXPECT_THROW(DumpReader::open(p), Error);
        }
        const auto findings = DumpReader::verify_file(p, allow);
        ASSERT_FALSE(findings.empty());
        EXPECT_EQ(findings[0].check, "kdump-table") << findings[0].message;
        EXPECT_EQ(findings[0].offset, table + e.entry * sizeof(PageEntry)) << findings[0].message;
    }
    EXPECT_TRUE(DumpReader::verify_file(good, allow).empty());
}

// The command lines: xen-dumpd --format kdump --compress ALG (on standard
// output: the flattened stream); xen-dump-convert --format kdump turns a v1 file into a
// compact one that keeps the dump's own keys and names its source.
TEST(KdumpCli, DumpdAndConvertWriteCompactFilesThatVerify) {
    json dom = dump::pv_domain(7, 8, "tree", 4200, holey_extents(0x100000));
    sim::Host host(dump::host_spec({dom}));
    TempDir out;
    const fs::path kd = out / "a.kdump", v1 = out / "a.core", conv = out / "b.kdump";
    RunResult r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "-q", "--format", "kdump", "--compress",
                       "lz4", "-o", kd.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    DumpReader k = DumpReader::open(kd);
    EXPECT_EQ(k.format(), FileFormat::kdump);
    EXPECT_TRUE(k.verify().empty());
    r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "--format", "kdump", "-o", "-"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.out.starts_with(std::string("makedumpfile\0\0\0\0", 16))) << "the flattened stream";
    r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "--compress", "zlib", "-o", v1.string()});
    EXPECT_EQ(r.exit_code, 2) << "--compress without --format kdump: " << r.err;

    r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "-q", "-o", v1.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run({"xen-dump-convert", "-q", "--format", "kdump", "--compress", "zlib", "-o", conv.string(), v1.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    DumpReader c = DumpReader::open(conv);
    DumpReader orig = DumpReader::open(v1);
    EXPECT_EQ(c.format(), FileFormat::kdump);
    EXPECT_TRUE(c.verify().empty());
    EXPECT_EQ(c.domain().get(keys::kTime), orig.domain().get(keys::kTime));
    EXPECT_EQ(c.domain().get(keys::kReason), orig.domain().get(keys::kReason));
    EXPECT_EQ(c.domain().get(keys::kSource), "v1:a.core");
    ASSERT_EQ(c.nr_pages(), orig.nr_pages());
    std::vector<std::byte> a(4096), b(4096);
    for (size_t i = 0; i < orig.entries().size(); i += 97) {
        const PageEntry e = orig.entries()[i];
        ASSERT_TRUE(orig.read_page_by_pfn(e.pfn, a));
        ASSERT_TRUE(c.read_page_by_gmfn(e.gmfn, b));
        ASSERT_EQ(0, std::memcmp(a.data(), b.data(), 4096)) << "pfn " << e.pfn;
    }
}

// --dump-level on the command line of xen-dump-convert: 0-31, with
// --format kdump only; each refused line exits 2 naming the option.
TEST(KdumpCli, DumpLevelIsCheckedOnTheCommandLine) {
    TempDir out;
    struct Line {
        std::vector<std::string> args;
        const char* says;
    };
    const Line lines[] = {
        {{"--dump-level", "31"}, "--dump-level needs --format kdump"},
        {{"--format", "kdump", "--dump-level", "32"}, "--dump-level wants a number from 0 to 31"},
        {{"--format", "kdump", "--dump-level", "-1"}, "--dump-level wants a number from 0 to 31"},
        {{"--format", "kdump", "--dump-level=3x"}, "--dump-level wants a number from 0 to 31"},
    };
    for (const auto& l : lines) {
        std::vector<std::string> argv = {"xen-dump-convert", "-n"};
        argv.insert(argv.end(), l.args.begin(), l.args.end());
        argv.push_back((out / "in.core").string());
        RunResult r = run(argv);
        EXPECT_EQ(r.exit_code, 2) << l.says;
        EXPECT_NE(r.err.find(l.says), std::string::npos) << r.err;
    }
}

// A guest without VMCOREINFO gets level 1 at most, and the converter says
// so: its zero pages are left out, every other page kept as it was; the
// first bitmap still names every page, the sub header the level applied.
TEST(Kdump, DumpLevelWithoutVmcoreinfoIsLevelOneWithAWarning) {
    TempDir dir;
    MixedGuest src;
    DumpSpec spec = mixed_spec();
    spec.vmcoreinfo.reset();
    const fs::path v1 = dir / "v1.core", out = dir / "out.kdump";
    write_dump_file(v1, spec, src);
    std::vector<std::string> warnings;
    ConvertOptions co;
    co.kdump = true;
    co.dump_level = 31;
    co.write.on_warning = [&](const std::string& w) { warnings.push_back(w); };
    convert_file(v1, out, co);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("dump level 1 instead of 31"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find(v1.string()), std::string::npos) << warnings[0];

    DumpReader r = DumpReader::open(out);
    EXPECT_TRUE(r.verify().empty());
    // Level 1 keeps every page; the zero ones (every third) point at the
    // shared zero page, as in makedumpfile's files, and read as zeros.
    std::vector<std::byte> want(4096), got(4096);
    for (const auto& e : src.list) {
        ASSERT_TRUE(r.read_page_by_pfn(e.pfn, got)) << "pfn " << e.pfn;
        if (e.pfn % 3 == 0)
            std::fill(want.begin(), want.end(), std::byte{0});
        else
            fill_mixed_page(e.pfn, want.data());
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), 4096)) << "pfn " << e.pfn;
    }
    EXPECT_EQ(r.nr_pages(), src.list.size());
    kdump::KdumpFile k(std::make_shared<reader::DumpFile>(out.string()));
    EXPECT_EQ(k.sub_header().dump_level, 1);
    EXPECT_EQ(k.present_bitmap().count(), src.list.size());
    EXPECT_EQ(k.stored_pages(), src.list.size());
}

// A PV guest's pages whose machine frames fall as the pfns rise (the
// scattered descriptor path), of the three mixed kinds, some unreadable.
struct FallingPvGuest : MixedSource {
    FallingPvGuest() : MixedSource([] {
        std::vector<PageEntry> list;
        for (uint64_t pfn = 0; pfn < 2600; ++pfn)
            if (pfn % 500 != 7) list.push_back({pfn, 0x90000 - 2 * pfn});
        return list;
    }()) {}
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> unreadable) override {
        MixedSource::read_pages(first, count, out, unreadable);
        for (size_t i = 0; i < count; ++i)
            if (std::binary_search(bad.begin(), bad.end(), list[first + i].pfn)) {
                unreadable[i] = 1;
                std::memset(out.data() + i * 4096, 0, 4096);
            }
    }
    std::vector<uint64_t> bad = {4, 300, 301, 1201};  // sorted
};

// The pages of a dump level go through the same pipeline as every page
// (kdump/write_kdump.hpp): a first pass finds what the level keeps (the
// pfns of the selection; zero pages stay, as the shared zero page), the
// second stores exactly those. Same bytes on 1 and 2 threads; an unreadable page is kept (it is
// not a zero page of the guest) and listed unless the selection drops its
// pfn; the 1st bitmap names every page, the sub header the level.
TEST(Kdump, ADumpLevelGivesTheSameBytesOnOneAndTwoThreads) {
    TempDir dir;
    FallingPvGuest probe;
    kernel::PageSelection sel;
    sel.requested_level = sel.level = 17;
    sel.keep = kernel::PfnBitmap(2600);
    for (const auto& e : probe.list)
        if (e.pfn % 5 != 1) sel.keep.set(e.pfn);  // drops pfn 301 (unreadable) and 1201 (unreadable)
    std::vector<uint64_t> want;
    for (const auto& e : probe.list) {
        if (sel.keep_pfn(e.pfn)) want.push_back(e.pfn);
    }
    DumpSpec spec = mixed_spec(format::GuestType::pv);
    spec.shared_info = std::vector<std::byte>(format::kSharedInfoSize);
    std::string first;
    for (unsigned threads : {1u, 2u}) {
        SCOPED_TRACE(threads);
        FallingPvGuest src;
        const fs::path p = dir / ("d17-" + std::to_string(threads));
        const WriteResult w = kdump::write_kdump_selection(p, spec, src, sel, test::kdump_options(Compression::zstd, threads));
        const std::string bytes = read_file(p);
        if (first.empty())
            first = bytes;
        else
            EXPECT_TRUE(bytes == first) << "threads change the output";
        EXPECT_EQ(w.nr_pages, want.size());
        EXPECT_EQ(w.unreadable_pfns, (std::vector<uint64_t>{4, 300}));

        DumpReader r = DumpReader::open(p);
        EXPECT_TRUE(r.verify().empty());
        EXPECT_EQ(r.unreadable_pfns(), (std::vector<uint64_t>{4, 300}));
        ASSERT_EQ(r.nr_pages(), want.size());
        std::vector<std::byte> expect(4096), got(4096);
        for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_EQ(r.entry(i).pfn, want[i]);
            ASSERT_TRUE(r.read_page_by_gmfn(0x90000 - 2 * want[i], got));
            if (std::binary_search(src.bad.begin(), src.bad.end(), want[i]) || want[i] % 3 == 0)
                std::memset(expect.data(), 0, 4096);
            else
                fill_mixed_page(want[i], expect.data());
            ASSERT_EQ(0, std::memcmp(expect.data(), got.data(), 4096)) << "pfn " << want[i];
        }
        kdump::KdumpFile k(std::make_shared<reader::DumpFile>(p.string()));
        EXPECT_EQ(k.sub_header().dump_level, 17);
        EXPECT_EQ(k.present_bitmap().count(), src.list.size());
        EXPECT_EQ(k.stored_pages(), want.size());
    }
}

// xen-dump-convert --format kdump: --threads 1 and --threads 2 write the
// same bytes, with and without a dump level.
TEST(KdumpCli, ConvertWritesTheSameBytesOnOneAndTwoThreads) {
    TempDir dir;
    FallingPvGuest src;
    DumpSpec spec = mixed_spec(format::GuestType::pv);
    spec.vmcoreinfo.reset();  // level 1 at most, with a warning
    spec.shared_info = std::vector<std::byte>(format::kSharedInfoSize);
    const fs::path v1 = dir / "pv.core";
    write_dump_file(v1, spec, src);
    for (const char* level : {"0", "1"}) {
        std::string first;
        for (const char* threads : {"1", "2"}) {
            const fs::path out = dir / (std::string("d") + level + "-t" + threads + ".kdump");
            RunResult r = run({"xen-dump-convert", "-q", "--format", "kdump", "--dump-level", level, "--threads", threads,
                               "-o", out.string(), v1.string()});
            ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
            const std::string bytes = read_file(out);
            if (first.empty())
                first = bytes;
            else
                EXPECT_TRUE(bytes == first) << "--dump-level " << level << ": --threads changes the output";
            DumpReader k = DumpReader::open(out);
            EXPECT_TRUE(k.verify().empty());
            // Level 1 keeps the zero pages too (as the shared zero page).
            EXPECT_EQ(k.nr_pages(), src.list.size());
        }
    }
}

TEST(Kdump, NeverReplacesAFile) {
    TempDir dir;
    MixedGuest src;
    const fs::path p = dir / "k";
    std::ofstream(p) << "keep";
    EXPECT_THROW(write_kdump_file(p, mixed_spec(), src), Error);
    EXPECT_EQ(read_file(p), "keep");
}

}  // namespace
}  // namespace xendump::test
