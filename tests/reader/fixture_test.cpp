// The real `xl dump-core` file of a 64-bit PV Linux 6.1 guest (Xen 4.17):
// Xen's section-only format, read with the same reader as v1 files.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <memory>

#include "findings.hpp"
#include "test_support.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

class XlDumpCore : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = std::make_unique<TempDir>();
        file_ = dir_->path() / "xl.core";
        auto src = shared_dir() / "fixtures" / "xl-dump-core-pv-6.1-128m.core.zst";
        auto r = run({"zstd", "-q", "-d", "-o", file_.string(), src.string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    static void TearDownTestSuite() { dir_.reset(); }

    // Raw bytes of a section, found by walking the section headers by hand.
    static std::vector<std::byte> section_bytes(const std::string& name, uint64_t& offset) {
        std::ifstream f(file_, std::ios::binary);
        auto read = [&](uint64_t off, void* p, size_t n) {
            f.clear();  // a short read at the end of the file sets failbit
            f.seekg(static_cast<std::streamoff>(off));
            f.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
        };
        uint64_t shoff;
        uint16_t shnum, shstrndx;
        read(0x28, &shoff, 8);
        read(0x3c, &shnum, 2);
        read(0x3e, &shstrndx, 2);
        auto field = [&](unsigned idx, unsigned at) {
            uint64_t v;
            read(shoff + idx * 64 + at, &v, 8);
            return v;
        };
        const uint64_t strtab = field(shstrndx, 24);
        for (unsigned i = 0; i < shnum; ++i) {
            uint32_t name_off;
            read(shoff + i * 64, &name_off, 4);
            char buf[32] = {};
            read(strtab + name_off, buf, sizeof buf - 1);
            if (name == buf) {
                offset = field(i, 24);
                std::vector<std::byte> out(field(i, 32));
                read(offset, out.data(), out.size());
                return out;
            }
        }
        return {};
    }

    static std::unique_ptr<TempDir> dir_;
    static std::filesystem::path file_;
};
std::unique_ptr<TempDir> XlDumpCore::dir_;
std::filesystem::path XlDumpCore::file_;

TEST_F(XlDumpCore, OpensAsXenElfPv64) {
    auto r = DumpReader::open(file_);
    EXPECT_EQ(r.format(), FileFormat::xen_elf);
    EXPECT_EQ(r.type(), format::GuestType::pv);
    EXPECT_EQ(r.guest_width(), 8u);
    EXPECT_EQ(r.header().xch_magic, format::kMagicPV);
    EXPECT_EQ(r.page_size(), 4096u);
    EXPECT_EQ(r.nr_pages(), r.header().xch_nr_pages);
    EXPECT_EQ(r.entries().size(), r.header().xch_nr_pages);
    EXPECT_EQ(r.vcpus().size(), r.header().xch_nr_vcpus);
    EXPECT_TRUE(r.domain().items().empty());
    EXPECT_FALSE(r.has_digests());
    EXPECT_EQ(r.xen_version().major_version, 4u);
    EXPECT_EQ(r.xen_version().minor_version, 17u);
    ASSERT_TRUE(r.shared_info().has_value());
    EXPECT_EQ(r.shared_info()->size(), 4096u);
    uint64_t pages_off = 0;
    auto pages = section_bytes(".xen_pages", pages_off);
    EXPECT_EQ(r.pages_offset(), pages_off);
    EXPECT_EQ(pages.size(), r.nr_pages() * 4096);
    uint64_t total = 0;
    for (const auto& run : r.runs()) total += run.count;
    EXPECT_EQ(total, r.nr_pages());
}

TEST_F(XlDumpCore, PagesByPfnAndGmfnMatchTheRawSections) {
    auto r = DumpReader::open(file_);
    uint64_t pages_off = 0, p2m_off = 0;
    auto pages = section_bytes(".xen_pages", pages_off);
    auto p2m = section_bytes(".xen_p2m", p2m_off);
    ASSERT_EQ(p2m.size(), r.entries().size() * 16);
    std::vector<std::byte> page(4096);
    const uint64_t n = r.entries().size();
    for (uint64_t i : {uint64_t{0}, uint64_t{1}, n / 3, n / 2 + 7, n - 1}) {
        uint64_t pfn, gmfn;
        std::memcpy(&pfn, p2m.data() + i * 16, 8);
        std::memcpy(&gmfn, p2m.data() + i * 16 + 8, 8);
        EXPECT_EQ(r.entries()[i].pfn, pfn);
        EXPECT_EQ(r.entries()[i].gmfn, gmfn);
        ASSERT_TRUE(r.read_page_by_pfn(pfn, page)) << "pfn " << pfn;
        EXPECT_EQ(std::memcmp(page.data(), pages.data() + i * 4096, 4096), 0) << "pfn " << pfn;
        std::fill(page.begin(), page.end(), std::byte{0xee});
        ASSERT_TRUE(r.read_page_by_gmfn(gmfn, page)) << "gmfn " << gmfn;
        EXPECT_EQ(std::memcmp(page.data(), pages.data() + i * 4096, 4096), 0) << "gmfn " << gmfn;
        EXPECT_EQ(r.index_of_gmfn(gmfn), i);
        EXPECT_EQ(r.page_offset(i), pages_off + i * 4096);
    }
    const uint64_t past = r.entries().back().pfn + 1;
    EXPECT_FALSE(r.read_page_by_pfn(past, page));
    EXPECT_FALSE(r.index_of_gmfn(~uint64_t{0} - 1).has_value());
}

TEST_F(XlDumpCore, GuestMarkerIsInSomePage) {
    auto r = DumpReader::open(file_);
    const std::string marker = "XENLAB-GUEST-MEMORY-MARKER";
    auto src = r.page_source();
    std::vector<std::byte> buf(1024 * 4096);
    std::vector<uint8_t> bad(1024);
    bool found = false;
    const size_t n = src->entries().size();
    for (size_t first = 0; first < n && !found; first += 1024) {
        size_t count = std::min<size_t>(1024, n - first);
        src->read_pages(first, count, buf, bad);
        std::string_view hay(reinterpret_cast<const char*>(buf.data()), count * 4096);
        found = hay.find(marker) != std::string_view::npos;
    }
    EXPECT_TRUE(found);
}

TEST_F(XlDumpCore, Verifies) {
    auto r = DumpReader::open(file_);
    VerifyOptions vo;
    vo.allow_no_digests = true;  // xl's format has none
    auto fs = r.verify(vo);
    EXPECT_TRUE(fs.empty()) << describe(fs);
}

TEST_F(XlDumpCore, VerifySaysItHasNoDigests) {
    auto r = DumpReader::open(file_);
    auto fs = r.verify();
    ASSERT_EQ(fs.size(), 1u) << describe(fs);
    EXPECT_EQ(fs[0].check, "digests-absent");
    auto res = run({"xen-dumpctl", "verify", "--quiet", file_.string()});
    EXPECT_EQ(res.exit_code, 1) << res.out << res.err;
    EXPECT_NE(res.out.find(": digests-absent: "), std::string::npos) << res.out;
    res = run({"xen-dumpctl", "verify", "--quiet", "--allow-no-digests", file_.string()});
    EXPECT_EQ(res.exit_code, 0) << res.out << res.err;
    EXPECT_NE(res.out.find("OK without digests (--allow-no-digests)"), std::string::npos) << res.out;
}

TEST_F(XlDumpCore, CtlInfoJson) {
    auto res = run({"xen-dumpctl", "info", "--json", file_.string()});
    ASSERT_EQ(res.exit_code, 0) << res.err;
    EXPECT_NE(res.out.find("\"xen_elf\""), std::string::npos) << res.out;
    EXPECT_NE(res.out.find("\"nr_pages\": 32768"), std::string::npos) << res.out;
}

}  // namespace
}  // namespace xendump::test
