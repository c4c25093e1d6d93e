// Conversions end to end: legacy files of every variant and width, xl's ELF
// dump-core (generated, and the real fixture), read back through DumpReader
// by pfn and gmfn, and by libkdumpfile in a child process.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "legacy/conversion.hpp"
#include "dump_check.hpp"
#include "legacy_gen.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"
#include "xendump/writer.hpp"
#include "xl_elf_gen.hpp"

namespace xendump::legacy {
namespace {

namespace fs = std::filesystem;
namespace gen = test::legacy_gen;
namespace xl = test::xl_elf_gen;

void expect_verifies(const DumpReader& r) {
    auto findings = r.verify();
    for (const auto& f : findings) ADD_FAILURE() << f.check << " " << f.structure << ": " << f.message;
}

// Every present pfn reads back equal, by pfn and (PV) by gmfn; nothing else is present.
void expect_same_pages(const DumpReader& r, const gen::Guest& g, bool pv) {
    ASSERT_EQ(r.nr_pages(), g.present());
    std::vector<std::byte> page(4096);
    for (uint64_t pfn = 0; pfn < g.mfn_of_pfn.size(); ++pfn) {
        bool present = g.mfn_of_pfn[pfn] != gen::kNoMfn;
        ASSERT_EQ(r.read_page_by_pfn(pfn, page), present) << "pfn " << pfn;
        if (!present) continue;
        ASSERT_EQ(page, g.page_of_pfn[pfn]) << "pfn " << pfn;
        if (pv) {
            ASSERT_TRUE(r.read_page_by_gmfn(g.mfn_of_pfn[pfn], page)) << "gmfn of pfn " << pfn;
            ASSERT_EQ(page, g.page_of_pfn[pfn]) << "gmfn of pfn " << pfn;
        }
    }
}

// Reads `entries` through libkdumpfile; returns what it read (pfn page, then gmfn page for PV).
std::vector<std::byte> kdumpfile_read(const fs::path& dump, std::span<const PageEntry> entries, test::TempDir& dir) {
    auto list = dir / "pages.list";
    {
        std::ofstream l(list);
        for (const auto& e : entries) l << e.pfn << ' ' << e.gmfn << '\n';
    }
    auto out = dir / "pages.out";
    auto r = test::run({"/usr/bin/python3", (test::source_root() / "tests/convert/kdumpfile_pages.py").string(),
                        dump.string(), list.string(), out.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(out, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> bytes(raw.size());
    std::memcpy(bytes.data(), raw.data(), raw.size());
    return bytes;
}

struct Case {
    gen::Variant variant;
    unsigned width;
    bool tree;
    bool inferred;
};

class LegacyConversion : public ::testing::TestWithParam<Case> {};

TEST_P(LegacyConversion, PagesReadBackByPfnAndGmfn) {
    const Case c = GetParam();
    test::TempDir dir;
    bool pv = c.variant == gen::Variant::pv_page_list || c.variant == gen::Variant::pv_pfn_order;
    std::vector<uint64_t> holes;
    if (c.variant == gen::Variant::pv_pfn_order || c.variant == gen::Variant::hvm_pfn_order) holes = {2, 3, 333};
    auto g = gen::make_guest({.width = c.width, .nr_pfns = 1200, .seed = 40 + c.width, .hole_pfns = holes,
                              .p2m_tree = c.tree});
    auto in = dir / "guest.core";
    gen::write_bytes(in, gen::make_file(g, {.variant = c.variant, .tool_width = c.width, .nr_vcpus = 2}));
    auto out = dir / "guest.v1.core";
    EXPECT_EQ(sniff_format(in), InputFormat::xc_core);
    Plan plan = convert_file(in, out, {.allow_inferred = c.inferred});
    EXPECT_EQ(plan.inferred, c.inferred);

    DumpReader r = DumpReader::open(out);
    expect_verifies(r);
    EXPECT_EQ(r.type(), pv ? format::GuestType::pv : format::GuestType::hvm);
    EXPECT_EQ(r.guest_width(), pv ? c.width : r.guest_width());
    EXPECT_EQ(r.domain().get(keys::kSource), "legacy-xc_core:guest.core");
    EXPECT_EQ(r.domain().get(keys::kLayout), plan.layout);
    EXPECT_EQ(r.domain().get(keys::kReason), "convert");
    EXPECT_EQ(r.vcpus().size(), 2u);
    expect_same_pages(r, g, pv);
    // HVM outputs' gmfn is the pfn, so only the pfn reads count.
    if (!pv) {
        std::vector<std::byte> page(4096);
        ASSERT_TRUE(r.read_page_by_gmfn(r.entries()[5].pfn, page));
    }

    // libkdumpfile reads the 64-bit and HVM outputs (it has no EM_386 support to test here).
    if (c.width == 8 || !pv) {
        auto entries = r.entries().first(std::min<size_t>(r.entries().size(), 64));
        auto got = kdumpfile_read(out, entries, dir);
        std::vector<std::byte> want;
        for (const auto& e : entries) {
            want.insert(want.end(), g.page_of_pfn[e.pfn].begin(), g.page_of_pfn[e.pfn].end());
            if (e.gmfn != e.pfn) want.insert(want.end(), g.page_of_pfn[e.pfn].begin(), g.page_of_pfn[e.pfn].end());
        }
        EXPECT_TRUE(got == want) << "libkdumpfile read different bytes (" << got.size() << " vs " << want.size() << ")";
    }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, LegacyConversion,
    ::testing::Values(Case{gen::Variant::pv_page_list, 8, true, false}, Case{gen::Variant::pv_page_list, 4, true, false},
                      Case{gen::Variant::pv_pfn_order, 8, false, false}, Case{gen::Variant::pv_pfn_order, 4, true, false},
                      Case{gen::Variant::hvm_pfn_order, 8, false, false},
                      Case{gen::Variant::hvm_pfn_order, 4, false, false},
                      Case{gen::Variant::hvm_page_list, 8, false, true}, Case{gen::Variant::hvm_page_list, 4, false, true}),
    [](const auto& info) {
        std::string name = gen::to_string(info.param.variant);
        std::replace(name.begin(), name.end(), '-', '_');
        return name + "_tools" + std::to_string(info.param.width * 8);
    });

// Issue 16.10 end to end: p2m trees with all-~0 leaves, their own and shared.
TEST(LegacyConversion, PageListWithBalloonedLeavesReadsBack) {
    for (bool shared : {false, true}) {
        test::TempDir dir;
        auto g = gen::make_guest({.width = 8, .nr_pfns = 3000, .seed = 52, .ballooned_leaves = {1, 3, 4},
                                  .shared_missing_leaf = shared});
        auto in = dir / "balloon.core";
        gen::write_bytes(in, gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = 8}));
        Plan plan = convert_file(in, dir / "balloon.v1.core", {});
        EXPECT_FALSE(plan.inferred) << "shared " << shared;
        DumpReader r = DumpReader::open(dir / "balloon.v1.core");
        expect_verifies(r);
        EXPECT_NE(r.domain().get(keys::kLayout).value_or("").find("decided-by=p2m-tree"), std::string::npos);
        expect_same_pages(r, g, true);
    }
}

TEST(LegacyConversion, InferredLayoutRecordedInOutput) {
    test::TempDir dir;
    auto g = gen::make_guest({.width = 8, .nr_pfns = 300, .seed = 50, .p2m_tree = false});
    auto in = dir / "notree.core";
    gen::write_bytes(in, gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = 8}));
    EXPECT_THROW(convert_file(in, dir / "refused.v1.core", {}), Error);
    EXPECT_FALSE(fs::exists(dir / "refused.v1.core"));
    convert_file(in, dir / "inferred.v1.core", {.allow_inferred = true});
    DumpReader r = DumpReader::open(dir / "inferred.v1.core");
    expect_verifies(r);
    EXPECT_EQ(r.domain().get(keys::kLayout), "pv-page-list;decided-by=inferred:slot-order");
    EXPECT_EQ(r.domain().get(keys::kSource), "legacy-xc_core:notree.core");
}

TEST(LegacyConversion, SourceIsNotModified) {
    test::TempDir dir;
    auto g = gen::make_guest({.width = 8, .nr_pfns = 500, .seed = 51});
    auto bytes = gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = 8});
    auto in = dir / "keep.core";
    gen::write_bytes(in, bytes);
    convert_file(in, dir / "keep.v1.core", {});
    std::ifstream f(in, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_EQ(raw.size(), bytes.size());
    EXPECT_EQ(std::memcmp(raw.data(), bytes.data(), raw.size()), 0);
}

class XlElfConversion : public ::testing::TestWithParam<bool> {};

TEST_P(XlElfConversion, TrailingInvalidEntriesAndHolesDropped) {
    bool hvm = GetParam();
    test::TempDir dir;
    xl::XlSpec spec{.hvm = hvm};
    for (uint64_t p = 0; p < 900; ++p)
        if (p % 97 != 5 && (p < 300 || p > 340)) spec.pfns.push_back(p);
    auto in = dir / "xl.core";
    gen::write_bytes(in, xl::make_xl_core(spec));
    EXPECT_EQ(sniff_format(in), InputFormat::xen_elf);
    auto out = dir / "xl.v1.core";
    Plan plan = convert_file(in, out, {});
    EXPECT_EQ(plan.pages, spec.pfns.size());
    DumpReader r = DumpReader::open(out);
    expect_verifies(r);
    EXPECT_EQ(r.nr_pages(), spec.pfns.size());
    EXPECT_EQ(r.domain().get(keys::kSource), "xen-elf-core:xl.core");
    EXPECT_EQ(r.vcpus().size(), 2u);
    std::vector<std::byte> page(4096), want(4096);
    for (uint64_t p = 0; p < 1000; ++p) {
        bool present = std::binary_search(spec.pfns.begin(), spec.pfns.end(), p);
        ASSERT_EQ(r.read_page_by_pfn(p, page), present) << p;
        if (!present) continue;
        test::fill_pattern_page(spec.seed, p, want.data());
        ASSERT_EQ(page, want) << p;
        ASSERT_TRUE(r.read_page_by_gmfn(xl::gmfn_of(spec, p), page));
        ASSERT_EQ(page, want) << p;
    }
    auto got = kdumpfile_read(out, r.entries().first(32), dir);
    std::vector<std::byte> expect;
    for (const auto& e : r.entries().first(32)) {
        test::fill_pattern_page(spec.seed, e.pfn, want.data());
        expect.insert(expect.end(), want.begin(), want.end());
        if (e.gmfn != e.pfn) expect.insert(expect.end(), want.begin(), want.end());
    }
    EXPECT_TRUE(got == expect) << "libkdumpfile read different bytes";
}

INSTANTIATE_TEST_SUITE_P(Kinds, XlElfConversion, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("hvm") : std::string("pv"); });

TEST(XlElfConversion, RealXlDumpCoreFixture) {
    auto fixture = test::shared_dir() / "fixtures/xl-dump-core-pv-6.1-128m.core.zst";
    if (!fs::exists(fixture)) GTEST_SKIP() << "fixture missing: " << fixture;
    test::TempDir dir;
    auto in = dir / "xl-pv.core";
    auto z = test::run({"zstd", "-q", "-d", fixture.string(), "-o", in.string()});
    ASSERT_EQ(z.exit_code, 0) << z.err;
    auto out = dir / "xl-pv.v1.core";
    convert_file(in, out, {});
    DumpReader src = DumpReader::open(in);
    DumpReader dst = DumpReader::open(out);
    expect_verifies(dst);
    ASSERT_EQ(dst.nr_pages(), src.nr_pages());
    ASSERT_TRUE(std::equal(src.entries().begin(), src.entries().end(), dst.entries().begin(),
                           [](const PageEntry& a, const PageEntry& b) { return a.pfn == b.pfn && a.gmfn == b.gmfn; }));
    std::vector<std::byte> a(4096), b(4096);
    for (const auto& e : src.entries()) {
        ASSERT_TRUE(src.read_page_by_pfn(e.pfn, a));
        ASSERT_TRUE(dst.read_page_by_pfn(e.pfn, b));
        ASSERT_EQ(a, b) << "pfn " << e.pfn;
        ASSERT_TRUE(dst.read_page_by_gmfn(e.gmfn, b));
        ASSERT_EQ(a, b) << "gmfn " << e.gmfn;
    }
    // The guest's zero pages are holes of the output, as in a dump: xl wrote
    // them out, and copying the source's pages as they lie must not either.
    uint64_t zero_pages = 0;
    for (const auto& e : src.entries()) {
        ASSERT_TRUE(src.read_page_by_pfn(e.pfn, a));
        zero_pages += std::all_of(a.begin(), a.end(), [](std::byte x) { return x == std::byte{0}; });
    }
    ASSERT_GT(zero_pages, 1000u) << "the fixture's guest has zero pages";
    struct stat st {};
    ASSERT_EQ(::stat(out.c_str(), &st), 0);
    const uint64_t allocated = static_cast<uint64_t>(st.st_blocks) * 512;
    EXPECT_LE(allocated, static_cast<uint64_t>(st.st_size) - zero_pages * 4096 + (uint64_t{1} << 20))
        << zero_pages << " zero pages, " << allocated << " bytes allocated of " << st.st_size;
}

TEST(Sniff, V1IsAlreadyCurrent) {
    test::TempDir dir;
    auto g = gen::make_guest({.width = 8, .nr_pfns = 200, .seed = 52});
    auto in = dir / "a.core";
    gen::write_bytes(in, gen::make_file(g, {.tool_width = 8}));
    convert_file(in, dir / "a.v1.core", {});
    EXPECT_EQ(sniff_format(dir / "a.v1.core"), InputFormat::v1);
    EXPECT_EQ(plan_conversion(dir / "a.v1.core", {}).format, InputFormat::v1);
}

// Issue 18: the compact file's note area carries every note of a v1 file,
// NT_XEN_UNREADABLE included. A v1 dump whose live pass could not read some
// pages lists them (and stores zeros); converted with xen-dump-convert
// --format kdump, the compact file lists the same pfns, and still stores
// zeros for them (not guest memory that nobody read).
TEST(V1ToKdump, UnreadablePagesStayListed) {
    for (const auto type : {format::GuestType::pv, format::GuestType::hvm}) {
        SCOPED_TRACE(std::string(format::to_string(type)));
        test::TempDir dir;
        const auto entries = test::entries_for(test::pfns_with_holes(600), type);
        test::PatternPageSource src(entries, 9);
        src.unreadable_pfns = {entries[3].pfn, entries[300].pfn, entries[599].pfn};
        const auto v1 = dir / "u.core", kd = dir / "u.kdump";
        write_dump_file(v1, test::make_spec(type, 8, 1), src);
        ASSERT_EQ(DumpReader::open(v1).unreadable_pfns(), src.unreadable_pfns);

        const test::RunResult c = test::run({"xen-dump-convert", "-q", "--format", "kdump", "-o", kd.string(), v1.string()});
        ASSERT_EQ(c.exit_code, 0) << c.err;
        const DumpReader r = DumpReader::open(kd);
        ASSERT_EQ(r.format(), FileFormat::kdump);
        EXPECT_EQ(r.unreadable_pfns(), src.unreadable_pfns);
        expect_verifies(r);
        std::vector<std::byte> page(4096), want(4096);
        for (const uint64_t pfn : src.unreadable_pfns) {
            ASSERT_TRUE(r.read_page_by_pfn(pfn, page)) << "pfn " << pfn;
            EXPECT_TRUE(std::all_of(page.begin(), page.end(), [](std::byte b) { return b == std::byte{0}; }))
                << "pfn " << pfn;
        }
        // The pages that were read are the v1 file's.
        const DumpReader orig = DumpReader::open(v1);
        EXPECT_EQ(r.nr_pages(), orig.nr_pages());
        for (const auto& e : entries) {
            ASSERT_TRUE(r.read_page_by_pfn(e.pfn, page)) << "pfn " << e.pfn;
            ASSERT_TRUE(orig.read_page_by_pfn(e.pfn, want)) << "pfn " << e.pfn;
            ASSERT_EQ(page, want) << "pfn " << e.pfn;
        }
        // xen-dumpctl info says so of both files.
        for (const auto& f : {v1, kd}) {
            const test::RunResult info = test::run({"xen-dumpctl", "info", f.string()});
            EXPECT_NE(info.out.find("Unreadable:   3 pages"), std::string::npos) << f << ": " << info.out;
        }
    }
}

// An output larger than what the writer keeps behind itself in the page
// cache: most of its pages reach the check as digests read back from the
// file, the rest are read again; either way every page is right.
TEST(LegacyConversion, LargeOutputIsCheckedFromItsReadBack) {
    test::TempDir dir(XENDUMP_BUILD_ROOT);
    auto g = gen::make_guest({.width = 8, .nr_pfns = 24576, .seed = 77});  // 96 MiB
    auto in = dir / "big.core";
    gen::write_bytes(in, gen::make_file(g, {.variant = gen::Variant::pv_page_list, .allocation_order = true}));
    auto out = dir / "big.v1.core";
    uint64_t read_back_chunks = 0;
    std::vector<Finding> at_check;
    ConvertOptions co;
    co.write.check_before_publish = [&](const fs::path& unpublished, const VerifyOptions& vo) {
        read_back_chunks = vo.pages_read_back->chunks;
        at_check = DumpReader::open(unpublished).verify(vo);
    };
    convert_file(in, out, co);
    for (const auto& f : at_check) ADD_FAILURE() << f.check << " " << f.structure << ": " << f.message;
    EXPECT_GT(read_back_chunks, 8u);
    EXPECT_LT(read_back_chunks, 96u);
    DumpReader r = DumpReader::open(out);
    expect_verifies(r);
    expect_same_pages(r, g, true);
}

}  // namespace
}  // namespace xendump::legacy
