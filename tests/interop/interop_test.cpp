// Files written by the library, read by other people's tools: binutils and
// elfutils readelf, objcopy, crash (ELF vmcore path) and libkdumpfile
// (Xen's xc_core ELF path). Each tool must see exactly the input.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "dump_check.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {
namespace {

using format::GuestType;

struct Case {
    const char* name;
    GuestType type;
    unsigned width;
    std::vector<uint64_t> pfns;
};

std::vector<uint64_t> runs_of(std::initializer_list<std::pair<uint64_t, uint64_t>> runs) {
    std::vector<uint64_t> v;
    for (auto [first, count] : runs)
        for (uint64_t i = 0; i < count; ++i) v.push_back(first + i);
    return v;
}

std::vector<Case> cases() {
    return {
        {"pv", GuestType::pv, 8, runs_of({{0, 300}, {301, 1}, {1000, 60}, {0x40000, 3}})},
        {"hvm", GuestType::hvm, 8, runs_of({{0, 160}, {0x100, 400}, {0xfee00, 2}})},
        {"pvh", GuestType::pvh, 8, runs_of({{1, 90}, {200, 10}})},
        {"pv32", GuestType::pv, 4, runs_of({{0, 100}, {150, 50}})},
    };
}

// A written dump plus what the tools must find in it.
struct Written {
    TempDir dir;
    std::filesystem::path dump;
    std::vector<PageEntry> entries;
    std::vector<std::byte> pages;  // table order
};

std::unique_ptr<Written> write_case(const Case& c) {
    auto w = std::make_unique<Written>();
    w->dump = w->dir / "dump.xen";
    w->entries = entries_for(c.pfns, c.type);
    PatternPageSource source(w->entries, 9);
    source.zero_pfns = {c.pfns[2]};
    write_dump_file(w->dump, make_spec(c.type, c.width, 2), source);
    for (size_t i = 0; i < w->entries.size(); ++i) {
        auto p = expected_page(source, i);
        w->pages.insert(w->pages.end(), p.begin(), p.end());
    }
    return w;
}

std::vector<std::pair<size_t, size_t>> runs(const std::vector<PageEntry>& e) {
    std::vector<std::pair<size_t, size_t>> out;  // first index, length
    for (size_t i = 0; i < e.size(); ++i) {
        if (i == 0 || e[i].pfn != e[i - 1].pfn + 1)
            out.push_back({i, 1});
        else
            ++out.back().second;
    }
    return out;
}

size_t count_loads(const std::string& program_headers) {
    std::istringstream in(program_headers);
    size_t n = 0;
    for (std::string line; std::getline(in, line);)
        if (line.rfind("  LOAD ", 0) == 0) ++n;
    return n;
}

class Interop : public ::testing::TestWithParam<Case> {};

TEST_P(Interop, ReadelfAndEuReadelfParseWithoutWarnings) {
    auto w = write_case(GetParam());
    auto r = run({"/usr/bin/readelf", "--wide", "-lSn", w->dump.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find(".xen_pages"), std::string::npos);
    auto e = run({"/usr/bin/eu-readelf", "-lSn", w->dump.string()});
    EXPECT_EQ(e.exit_code, 0) << e.err;
    EXPECT_EQ(e.err, "");
    EXPECT_NE(e.out.find("XEN CORE"), std::string::npos);
}

// BFD builds a core file's sections from its program headers (loadN, noteN)
// and ignores the section headers, and `objcopy -O binary` refuses core input
// ("invalid operation"), so `--only-section=.xen_pages` cannot work on any
// ET_CORE file. What objcopy can do is dump each PT_LOAD: together they must
// be exactly the pages.
TEST_P(Interop, ObjcopyDumpsEveryRunAsThePages) {
    if (GetParam().width == 4) GTEST_SKIP() << "BFD has no elf64-i386 target: EM_386 in ELFCLASS64 is unrecognised";
    auto w = write_case(GetParam());
    const auto rs = runs(w->entries);
    std::vector<std::string> argv = {"/usr/bin/objcopy"};
    for (size_t i = 0; i < rs.size(); ++i)
        argv.push_back("--dump-section=load" + std::to_string(i + 1) + "=" + (w->dir / ("run" + std::to_string(i))).string());
    argv.push_back(w->dump.string());
    argv.push_back((w->dir / "scratch.o").string());  // never rewrite the dump in place
    auto r = run(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::byte> all;
    for (size_t i = 0; i < rs.size(); ++i) {
        auto part = slurp(w->dir / ("run" + std::to_string(i)));
        EXPECT_EQ(part.size(), rs[i].second * 4096) << "run " << i;
        all.insert(all.end(), part.begin(), part.end());
    }
    EXPECT_TRUE(all == w->pages);
}

TEST_P(Interop, CrashSeesOneLoadSegmentPerRunOrDeclinesAPvFile) {
    const Case& c = GetParam();
    if (c.width == 4) GTEST_SKIP() << "crash's ELF path accepts EM_386 only in ELFCLASS32 files";
    auto w = write_case(c);
    auto r = run({"/usr/bin/crash", "-d1", w->dump.string()});
    const std::string& out = r.out;
    if (c.type == GuestType::pv) {
        // xen-dump-core(5): a PV guest's program headers follow the section
        // headers, so crash's ELF reader declines the file (its Xen dump
        // reader takes it; kernel_dump_test runs crash on one end to end).
        EXPECT_NE((out + r.err).find("PHdr to far into file"), std::string::npos) << out << r.err;
        EXPECT_EQ(out.find("pt_load_segment"), std::string::npos) << out;
        return;
    }
    std::regex seg(R"(pt_load_segment\[(\d+)\]:\s+file_offset: ([0-9a-f]+)\s+phys_start: ([0-9a-f]+)\s+phys_end: ([0-9a-f]+))");
    std::vector<std::array<uint64_t, 3>> got;
    for (auto it = std::sregex_iterator(out.begin(), out.end(), seg); it != std::sregex_iterator(); ++it)
        got.push_back({std::stoull((*it)[2], nullptr, 16), std::stoull((*it)[3], nullptr, 16),
                       std::stoull((*it)[4], nullptr, 16)});
    const auto rs = runs(w->entries);
    ASSERT_EQ(got.size(), rs.size()) << out.substr(0, 4000) << r.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(num_pt_load_segments: (\d+))")));
    EXPECT_EQ(std::stoull(m[1]), rs.size());
    const ParsedDump d(w->dump);
    const uint64_t pages_off = d.section(".xen_pages")->sh_offset;
    for (size_t i = 0; i < rs.size(); ++i) {
        EXPECT_EQ(got[i][0], pages_off + rs[i].first * 4096) << "segment " << i;
        EXPECT_EQ(got[i][1], w->entries[rs[i].first].pfn * 4096) << "segment " << i;
        EXPECT_EQ(got[i][2], (w->entries[rs[i].first].pfn + rs[i].second) * 4096) << "segment " << i;
    }
}

TEST_P(Interop, LibkdumpfileReadsEveryPageAndNoHole) {
    const Case& c = GetParam();
    if (c.width == 4) GTEST_SKIP() << "libkdumpfile 0.5.1 crashes on every EM_386 Xen dump";
    auto w = write_case(c);
    {
        std::ofstream expect(w->dir / "expect");
        expect << "type " << format::to_string(c.type) << "\n";
        for (const auto& e : w->entries) expect << "page " << e.pfn << " " << e.gmfn << "\n";
        // Holes: the pfn after each run, and one far beyond the last.
        for (auto [first, len] : runs(w->entries)) expect << "hole " << w->entries[first + len - 1].pfn + 1 << "\n";
        expect << "hole " << w->entries.back().pfn + 100000 << "\n";
        std::ofstream pages(w->dir / "pages", std::ios::binary);
        pages.write(reinterpret_cast<const char*>(w->pages.data()), static_cast<std::streamsize>(w->pages.size()));
    }
    auto r = run({"/usr/bin/python3", (source_root() / "tests/interop/libkdumpfile_read.py").string(),
                  w->dump.string(), (w->dir / "expect").string(), (w->dir / "pages").string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("checked " + std::to_string(w->entries.size()) + " pages, 0 failures"), std::string::npos)
        << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Variants, Interop, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// PN_XNUM: 70,000 runs. binutils remarks on section 0's sh_info being used
// for the count; that is the one message allowed.
TEST(InteropXnum, ReadersResolvePnXnum) {
    TempDir dir;
    std::vector<uint64_t> pfns;
    for (uint64_t i = 0; i < 70000; ++i) pfns.push_back(2 * i);
    PatternPageSource source(entries_for(pfns, GuestType::hvm));
    source.zero_pfns = pfns;  // holes keep the file small
    const auto path = dir / "xnum.xen";
    write_dump_file(path, make_spec(GuestType::hvm, 8, 1), source);
    auto r = run({"/usr/bin/readelf", "--wide", "-lS", path.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("There are 70001 program headers"), std::string::npos) << r.out.substr(0, 2000);
    std::istringstream err(r.err);
    for (std::string line; std::getline(err, line);)
        EXPECT_NE(line.find("[ 0]: Unexpected value (70001) in info field"), std::string::npos)
            << "unexpected readelf message: " << line;
    auto e = run({"/usr/bin/eu-readelf", "-l", path.string()});
    EXPECT_EQ(e.exit_code, 0) << e.err;
    EXPECT_EQ(e.err, "");
    EXPECT_EQ(count_loads(e.out), 70000u);
    EXPECT_EQ(count_loads(r.out), 70000u);
}

}  // namespace
}  // namespace xendump::test
