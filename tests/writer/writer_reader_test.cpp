// The writer's files read back through DumpReader (libelf, written
// independently): metadata, every page by pfn and gmfn, holes, verify().
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "dump_check.hpp"
#include "xendump/reader.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {
namespace {

using format::GuestType;

struct Case {
    const char* name;
    GuestType type;
    unsigned width;
};

class WriterThenReader : public ::testing::TestWithParam<Case> {};

TEST_P(WriterThenReader, ReadsBackWhatWasWritten) {
    const Case& c = GetParam();
    TempDir dir;
    std::vector<uint64_t> pfns;
    for (uint64_t pfn = 0; pfns.size() < 1500; ++pfn)
        if (pfn % 7 != 6) pfns.push_back(pfn);
    DumpSpec spec = make_spec(c.type, c.width, 2);
    PatternPageSource source(entries_for(pfns, c.type), 4);
    source.zero_pfns = {pfns[3]};
    source.unreadable_pfns = {pfns[10], pfns[1499]};
    write_dump_file(dir / "d", spec, source);

    DumpReader r = DumpReader::open(dir / "d");
    EXPECT_EQ(r.format(), FileFormat::v1);
    EXPECT_EQ(r.type(), c.type);
    EXPECT_EQ(r.guest_width(), c.width);
    EXPECT_EQ(r.nr_pages(), pfns.size());
    EXPECT_EQ(r.page_size(), 4096u);
    EXPECT_TRUE(r.has_digests());
    EXPECT_EQ(r.unreadable_pfns(), source.unreadable_pfns);
    ASSERT_EQ(r.entries().size(), source.entries().size());
    for (size_t i = 0; i < pfns.size(); ++i) {
        EXPECT_EQ(r.entries()[i].pfn, source.entries()[i].pfn);
        EXPECT_EQ(r.entries()[i].gmfn, source.entries()[i].gmfn);
    }
    const auto vcpus = r.vcpus();
    ASSERT_EQ(vcpus.size(), spec.vcpus.size());
    for (size_t v = 0; v < vcpus.size(); ++v) {
        EXPECT_EQ(vcpus[v].id, spec.vcpus[v].id);
        ASSERT_GE(vcpus[v].bytes.size(), spec.vcpus[v].bytes.size());
        EXPECT_EQ(std::memcmp(vcpus[v].bytes.data(), spec.vcpus[v].bytes.data(), spec.vcpus[v].bytes.size()), 0);
    }
    EXPECT_EQ(r.shared_info(), spec.shared_info);
    std::vector<std::byte> page(4096);
    for (size_t i = 0; i < pfns.size(); ++i) {
        ASSERT_TRUE(r.read_page_by_pfn(pfns[i], page)) << "pfn " << pfns[i];
        ASSERT_TRUE(page == expected_page(source, i)) << "pfn " << pfns[i];
        ASSERT_TRUE(r.read_page_by_gmfn(source.entries()[i].gmfn, page)) << "gmfn of pfn " << pfns[i];
    }
    EXPECT_FALSE(r.read_page_by_pfn(6, page)) << "a hole must be not found";
    EXPECT_FALSE(r.read_page_by_pfn(pfns.back() + 1, page));
    const auto findings = r.verify();
    for (const auto& f : findings) ADD_FAILURE() << f.check << " " << f.structure << ": " << f.message;
}

INSTANTIATE_TEST_SUITE_P(Types, WriterThenReader,
                         ::testing::Values(Case{"pv", GuestType::pv, 8}, Case{"hvm", GuestType::hvm, 8},
                                           Case{"pvh", GuestType::pvh, 8}, Case{"pv32", GuestType::pv, 4}),
                         [](const auto& info) { return std::string(info.param.name); });

// Verification splits the page chunks between two threads: a mismatch in
// either half is found, reported once, in chunk order, at its offset.
TEST(WriterThenReader, DigestMismatchesInBothHalvesOfAParallelVerify) {
    TempDir dir;
    const DumpSpec spec = make_spec(GuestType::hvm, 8, 1);
    std::vector<uint64_t> pfns;
    for (uint64_t i = 0; i < 80 * 256; ++i) pfns.push_back(i);  // 80 chunks
    PatternPageSource source(entries_for(pfns, GuestType::hvm));
    write_dump_file(dir / "d", spec, source);
    EXPECT_TRUE(DumpReader::verify_file(dir / "d").empty());
    const uint64_t pages = DumpReader::open(dir / "d").pages_offset();
    for (uint64_t chunk : {70u, 3u}) {
        std::fstream f(dir / "d", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(pages + chunk * 256 * 4096 + 4096 * 9 + 5));
        f.put('\x5a');
    }
    const auto fs = DumpReader::verify_file(dir / "d");
    ASSERT_EQ(fs.size(), 2u);
    EXPECT_EQ(fs[0].check, "digest-mismatch");
    EXPECT_EQ(fs[0].offset, pages + 3 * 256 * 4096);
    EXPECT_EQ(fs[1].offset, pages + 70 * 256 * 4096);
}

}  // namespace
}  // namespace xendump::test
