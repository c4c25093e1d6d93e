// Round trips of every variant of the v1 writer, checked by an independent
// parser (dump_check.cpp) and, when it is built, by DumpReader.
#include <gtest/gtest.h>

#include <numeric>

#include "dump_check.hpp"
#include "xendump/error.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {
namespace {

using format::GuestType;

struct Variant {
    const char* name;
    GuestType type;
    unsigned width;
    std::vector<uint64_t> pfns;
    bool all_zero = false;  // keeps the 70,000-run file small (holes)
    bool kernel_notes = false;
    unsigned vcpus = 2;
};

std::vector<uint64_t> range(uint64_t first, uint64_t count, uint64_t step = 1) {
    std::vector<uint64_t> v(count);
    for (uint64_t i = 0; i < count; ++i) v[i] = first + i * step;
    return v;
}

std::vector<uint64_t> concat(std::vector<uint64_t> a, const std::vector<uint64_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

std::vector<Variant> variants() {
    return {
        {"dense_pv", GuestType::pv, 8, range(0, 3000)},
        {"hole_every_other_page", GuestType::pv, 8, range(0, 2000, 2)},
        {"xnum_70000_runs", GuestType::pv, 8, range(1, 70000, 2), true},
        {"hvm_mmio_hole", GuestType::hvm, 8, concat(range(0, 1500), range(0xf0000, 700))},
        {"pvh", GuestType::pvh, 8, concat(range(0, 300), range(1000, 900))},
        {"pv32", GuestType::pv, 4, concat(range(0, 1100), range(5000, 10)), false, false, 3},
        {"pv_kernel_notes", GuestType::pv, 8, range(16, 600), false, true, 4},
        {"one_vcpu_one_page", GuestType::pv, 8, {42}, false, false, 1},
    };
}

class WriterRoundTrip : public ::testing::TestWithParam<Variant> {};

TEST_P(WriterRoundTrip, FileMatchesInput) {
    const Variant& v = GetParam();
    TempDir dir;
    DumpSpec spec = make_spec(v.type, v.width, v.vcpus);
    if (v.kernel_notes) {
        spec.vmcoreinfo = "OSRELEASE=6.1.0-test\nPAGESIZE=4096\nSYMBOL(init_uts_ns)=ffffffff82012340\n";
        for (unsigned i = 0; i < v.vcpus; ++i) spec.prstatus.push_back(std::vector<std::byte>(336, static_cast<std::byte>(i + 1)));
    }
    PatternPageSource source(entries_for(v.pfns, v.type), 11);
    if (v.all_zero)
        source.zero_pfns = v.pfns;
    else
        source.zero_pfns = {v.pfns[v.pfns.size() / 2]};
    const auto path = dir / "dump.xen";
    const WriteResult r = write_dump_file(path, spec, source);
    EXPECT_EQ(r.nr_pages, v.pfns.size());
    EXPECT_EQ(r.file_size, std::filesystem::file_size(path));
    EXPECT_TRUE(r.unreadable_pfns.empty());
    check_dump(path, spec, source);
}

INSTANTIATE_TEST_SUITE_P(Variants, WriterRoundTrip, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Writer, WithoutDigestsHasNoDigestNote) {
    TempDir dir;
    DumpSpec spec = make_spec(GuestType::hvm, 8, 1);
    PatternPageSource source(entries_for(range(0, 700), GuestType::hvm));
    WriteOptions opt;
    opt.digests = false;
    write_dump_file(dir / "d", spec, source, opt);
    check_dump(dir / "d", spec, source, false);
}

TEST(Writer, RefusesZeroVcpus) {
    TempDir dir;
    DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    spec.vcpus.clear();
    PatternPageSource source(entries_for(range(0, 10), GuestType::pv));
    EXPECT_THROW(write_dump_file(dir / "d", spec, source), Error);
    EXPECT_FALSE(std::filesystem::exists(dir / "d"));
}

TEST(Writer, RefusesEntriesNotAscending) {
    TempDir dir;
    DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    for (auto pfns : {std::vector<uint64_t>{1, 2, 2, 3}, std::vector<uint64_t>{5, 4}}) {
        PatternPageSource source(entries_for(pfns, GuestType::pv));
        EXPECT_THROW(write_dump_file(dir / "d", spec, source), Error);
        EXPECT_FALSE(std::filesystem::exists(dir / "d"));
    }
}

TEST(Writer, RefusesContextsOfTheWrongSize) {
    TempDir dir;
    DumpSpec spec = make_spec(GuestType::pv, 4, 1);
    spec.vcpus[0].bytes.resize(format::kVcpuContextSize64);  // a 64-bit context in a 32-bit slot
    PatternPageSource source(entries_for(range(0, 10), GuestType::pv));
    EXPECT_THROW(write_dump_file(dir / "d", spec, source), Error);
}

TEST(Writer, ExpectedFileSizeIsExactWhetherPagesAreUnreadableOrNot) {
    TempDir dir;
    DumpSpec spec = make_spec(GuestType::pv, 8, 2);
    const auto pfns = range(0, 1300, 3);
    PatternPageSource clean(entries_for(pfns, GuestType::pv));
    PatternPageSource broken(entries_for(pfns, GuestType::pv));
    broken.unreadable_pfns = {pfns[0], pfns[7], pfns[1299]};
    const uint64_t expected = expected_file_size(spec, clean.entries());
    EXPECT_EQ(write_dump_file(dir / "a", spec, clean).file_size, expected);
    const WriteResult r = write_dump_file(dir / "b", spec, broken);
    EXPECT_EQ(r.file_size, expected);
    EXPECT_EQ(r.unreadable_pfns, broken.unreadable_pfns);
    check_dump(dir / "b", spec, broken);
}

TEST(Writer, EveryPageUnreadable) {
    TempDir dir;
    DumpSpec spec = make_spec(GuestType::hvm, 8, 1);
    const auto pfns = range(100, 40);
    PatternPageSource source(entries_for(pfns, GuestType::hvm));
    source.unreadable_pfns = pfns;
    const WriteResult r = write_dump_file(dir / "d", spec, source);
    EXPECT_EQ(r.unreadable_pfns, pfns);
    check_dump(dir / "d", spec, source);
}

TEST(Writer, HvmGmfnIsWrittenAsPfn) {
    TempDir dir;
    DumpSpec spec = make_spec(GuestType::hvm, 8, 1);
    std::vector<PageEntry> entries = {{1, 99}, {2, 98}, {10, 0}};
    PatternPageSource source(entries);
    write_dump_file(dir / "d", spec, source);
    PatternPageSource same(entries_for({1, 2, 10}, GuestType::hvm));
    check_dump(dir / "d", spec, same);
}

}  // namespace
}  // namespace xendump::test
