// Dump levels (issue 18 item 1): the classifier of libdump
// kernel/dump_level.hpp on the real Linux 6.1 guests of the fixtures, dumped
// as HVM guests of the simulated host, against makedumpfile run on the same
// v1 dump: for each level, the pages makedumpfile -d LEVEL keeps (its kdump
// file's second bitmap, less the pages it wrote as the shared zero page)
// are, page by page, the pages we keep. The counts are committed too, so a
// wrong classifier fails without makedumpfile. Then what analysis needs
// survives a lying struct page, a guest without VMCOREINFO gets level 1, and
// xen-dumpctl estimate prints the same numbers.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "dump_support.hpp"
#include "guest_ram.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
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

// makedumpfile cannot read a PV guest's v1 file (its program headers follow
// the sections), nor follow page tables that hold machine frames. What it is
// given instead: the same guest as an ELF vmcore of pseudo-physical memory
// (one PT_LOAD per run of pfns, p_paddr = pfn * 4096, and the VMCOREINFO
// note) whose kernel page tables (every table reached from init_top_pgt)
// hold pfns, translated back through the dump's pfn->gmfn table, as an HVM
// guest's would. Every other byte is the dump's. Our classifier reads the
// original file (through the p2m), makedumpfile the copy.
void write_pfn_space_vmcore(const fs::path& v1, const fs::path& out) {
    DumpReader r = DumpReader::open(v1);
    ASSERT_EQ(r.type(), format::GuestType::pv);
    const auto info = r.vmcoreinfo();
    ASSERT_TRUE(info);
    auto vi = kernel::Vmcoreinfo::parse(*info);
    ASSERT_TRUE(vi);
    const auto entries = r.entries();
    std::vector<std::byte> pages(entries.size() * 4096);
    for (size_t i = 0; i < entries.size(); ++i)
        ASSERT_TRUE(r.read_page_by_pfn(entries[i].pfn, std::span(pages).subspan(i * 4096, 4096)));
    std::map<uint64_t, uint64_t> m2p, index;
    for (size_t i = 0; i < entries.size(); ++i) {
        m2p[entries[i].gmfn] = entries[i].pfn;
        index[entries[i].pfn] = i;
    }
    const auto paging = kernel::KernelPaging::from_vmcoreinfo(*vi);
    ASSERT_TRUE(paging.top_table);
    constexpr uint64_t kMask = 0x000ffffffffff000ULL;
    std::set<uint64_t> done;
    std::function<void(uint64_t, int)> walk = [&](uint64_t pfn, int level) {
        if (!index.contains(pfn) || !done.insert(pfn).second) return;
        std::byte* table = pages.data() + index[pfn] * 4096;
        for (int k = 0; k < 512; ++k) {
            uint64_t e;
            std::memcpy(&e, table + 8 * k, 8);
            auto to = m2p.find((e & kMask) >> 12);
            if (!(e & 1) || to == m2p.end()) continue;  // Xen's own frames: never read
            const uint64_t rewritten = (e & ~kMask) | (to->second << 12);
            std::memcpy(table + 8 * k, &rewritten, 8);
            if (level > 1 && !((level == 2 || level == 3) && (e & 0x80))) walk(to->second, level - 1);
        }
    };
    walk(*paging.top_table / 4096, paging.five_level ? 5 : 4);
    EXPECT_GT(done.size(), 10u);

    std::vector<std::pair<uint64_t, uint64_t>> runs;  // first pfn, count
    for (const auto& e : entries)
        if (!runs.empty() && runs.back().first + runs.back().second == e.pfn) ++runs.back().second;
        else runs.push_back({e.pfn, 1});
    std::string note(12, '\0');
    const uint32_t nhdr[3] = {11, static_cast<uint32_t>(info->size()), 0};
    std::memcpy(note.data(), nhdr, 12);
    note += std::string("VMCOREINFO\0\0", 12) + *info + std::string((4 - info->size() % 4) % 4, '\0');
    const size_t phnum = 1 + runs.size();
    const uint64_t note_off = sizeof(Elf64_Ehdr) + phnum * sizeof(Elf64_Phdr);
    const uint64_t data_off = (note_off + note.size() + 4095) / 4096 * 4096;
    Elf64_Ehdr eh = core_elf_header(EM_X86_64);
    eh.e_phoff = sizeof eh;
    eh.e_ehsize = sizeof eh;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = static_cast<uint16_t>(phnum);
    std::vector<Elf64_Phdr> ph(phnum);
    ph[0] = {PT_NOTE, 0, note_off, 0, 0, note.size(), note.size(), 0};
    uint64_t off = data_off;
    for (size_t i = 0; i < runs.size(); ++i) {
        ph[i + 1] = {PT_LOAD, PF_R | PF_W | PF_X, off, 0, runs[i].first * 4096, runs[i].second * 4096,
                     runs[i].second * 4096, 0};
        off += runs[i].second * 4096;
    }
    std::ofstream o(out, std::ios::binary);
    o.write(reinterpret_cast<const char*>(&eh), sizeof eh);
    o.write(reinterpret_cast<const char*>(ph.data()), static_cast<std::streamsize>(ph.size() * sizeof(Elf64_Phdr)));
    o.write(note.data(), static_cast<std::streamsize>(note.size()));
    o.write(std::string(data_off - note_off - note.size(), '\0').data(), static_cast<std::streamsize>(data_off - note_off - note.size()));
    o.write(reinterpret_cast<const char*>(pages.data()), static_cast<std::streamsize>(pages.size()));  // pfn order
    ASSERT_TRUE(o.good());
}

// What makedumpfile -d keeps of the real PV guest (the xl dump-core fixture,
// converted to v1), read through the pfn-space copy above.
const std::map<unsigned, uint64_t> kPvKept = {{1, 15385}, {2, 32282}, {4, 32282}, {8, 32740}, {16, 18797}, {31, 12414}};

TEST(DumpLevel, PvGuestKeepsWhatMakedumpfileKeeps) {
    TempDir dir;
    const fs::path xl = dir / "xl-pv.core", v1 = dir / "pv.core", copy = dir / "pv-pfn.vmcore";
    RunResult z = run({"zstd", "-q", "-d", "-o", xl.string(),
                       (shared_dir() / "fixtures" / "xl-dump-core-pv-6.1-128m.core.zst").string()});
    ASSERT_EQ(z.exit_code, 0) << z.err;
    RunResult c = run({"xen-dump-convert", "-q", "-o", v1.string(), xl.string()});
    ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
    for (unsigned level : kLevels) {
        SCOPED_TRACE("level " + std::to_string(level));
        EXPECT_EQ(our_kept(v1, level).size(), kPvKept.at(level));
    }
    if (!have_makedumpfile()) GTEST_SKIP() << "makedumpfile is not installed: only the committed counts compared";
    write_pfn_space_vmcore(v1, copy);
    for (unsigned level : kLevels) {
        SCOPED_TRACE("level " + std::to_string(level));
        const auto ours = our_kept(v1, level);
        const auto theirs = makedumpfile_kept(copy, level, dir.path());
        EXPECT_EQ(ours.size(), theirs.size());
        EXPECT_TRUE(ours == theirs) << "kept by us only: " << difference(ours, theirs)
                                    << "; by makedumpfile only: " << difference(theirs, ours);
    }
}

TEST(DumpLevel, KaslrGuestKeepsWhatMakedumpfileKeeps) { expect_equal_to_makedumpfile(kaslr_dump(), kKaslrKept); }

TEST(DumpLevel, PlainGuestKeepsWhatMakedumpfileKeeps) { expect_equal_to_makedumpfile(plain_dump(), kPlainKept); }

kernel::DumpLevelInput ram_input(RamPageSource& source, const kernel::Vmcoreinfo* info,
                                 const std::map<uint64_t, std::vector<std::byte>>* overlay = nullptr) {
    kernel::DumpLevelInput in;
    in.present = kernel::borrowed(source);
    in.reader = ram_reader(guest_ram(), overlay);
    in.vmcoreinfo = info;
    return in;
}

TEST(DumpLevel, WithoutVmcoreinfoOnlyZeroPagesGo) {
    RamPageSource source(guest_ram());
    kernel::PageSelection s = kernel::select_pages(ram_input(source, nullptr), 31);
    EXPECT_EQ(s.requested_level, 31u);
    EXPECT_EQ(s.level, 1u);
    ASSERT_FALSE(s.limits.empty());
    EXPECT_NE(s.limits[0].find("no VMCOREINFO"), std::string::npos) << s.limits[0];
    EXPECT_EQ(s.keep.count(), kFixturePages);  // every page passes the struct page rules
    const std::vector<std::byte> zero(4096);
    std::vector<std::byte> data(4096, std::byte{1});
    EXPECT_FALSE(s.keep_page(5, zero));
    EXPECT_TRUE(s.keep_page(5, data));
    // The same guest with its VMCOREINFO: level 31, fewer pages.
    kernel::PageSelection full = kernel::select_pages(ram_input(source, &fixture_vmcoreinfo()), 31);
    EXPECT_EQ(full.level, 31u);
    EXPECT_TRUE(full.limits.empty());
    EXPECT_LT(full.keep.count(), kFixturePages);
}

// A struct page of 99999 bytes, and sections of 8 KiB (a section per two
// pfns: 12 bytes of dom0's memory per guest pfn; no kernel's are under 16 MiB).
TEST(DumpLevel, ImpossibleGeometryFallsBackToLevelOne) {
    struct Lie {
        std::string line, lie, why;
    };
    for (const auto& [line, lie, why] : {Lie{"SIZE(page)=64\n", "SIZE(page)=99999\n", "only zero pages can be excluded"},
                                         Lie{"NUMBER(SECTION_SIZE_BITS)=27\n", "NUMBER(SECTION_SIZE_BITS)=13\n",
                                             "geometry is impossible"}}) {
        SCOPED_TRACE(lie);
        std::string text = fixture_vmcoreinfo().text();
        const size_t at = text.find(line);
        ASSERT_NE(at, std::string::npos);
        text.replace(at, line.size(), lie);
        auto info = kernel::Vmcoreinfo::parse(text);
        ASSERT_TRUE(info);
        RamPageSource source(guest_ram());
        kernel::PageSelection s = kernel::select_pages(ram_input(source, &*info), 31);
        EXPECT_EQ(s.level, 1u);
        ASSERT_FALSE(s.limits.empty());
        EXPECT_NE(s.limits[0].find(why), std::string::npos) << s.limits[0];
        EXPECT_THROW(kernel::select_pages(ram_input(source, &*info), 32), xendump::Error);
    }
}

// The guest's struct page of `pfn`, found as the classifier finds it
// (SPARSEMEM_EXTREME root array, section_mem_map), as a guest-physical address.
uint64_t struct_page_paddr(const kernel::Vmcoreinfo& info, uint64_t pfn) {
    kernel::PhysicalMemory phys(ram_reader(guest_ram()));
    kernel::KernelVirtualMemory kvm(phys, kernel::KernelPaging::from_vmcoreinfo(info));
    auto u64 = [&](uint64_t vaddr) {
        uint64_t v = 0;
        EXPECT_TRUE(kvm.read(vaddr, std::as_writable_bytes(std::span(&v, 1))));
        return v;
    };
    const uint64_t section = pfn >> (*info.number("SECTION_SIZE_BITS") - 12);
    const uint64_t per_root = 4096 / 32;  // SIZE(mem_section) = 32 on this kernel
    const uint64_t root = u64(*info.symbol("mem_section") + section / per_root * 8);
    const uint64_t mem_map = u64(root + section % per_root * 32) & ~uint64_t{31};
    auto paddr = kvm.translate(mem_map + pfn * 64);
    EXPECT_TRUE(paddr.has_value());
    return paddr.value_or(0);
}

// A guest whose struct page calls its own top page table a free page (a
// corrupt or hostile struct page array) still has that table in the dump:
// the free-page rule matched it (one more page protected), the walk kept it.
TEST(DumpLevel, ALyingStructPageCannotHideThePageTables) {
    const kernel::Vmcoreinfo& info = fixture_vmcoreinfo();
    const auto top = kernel::KernelPaging::from_vmcoreinfo(info).top_table;
    ASSERT_TRUE(top);
    const uint64_t table_pfn = *top / 4096;
    const uint64_t at = struct_page_paddr(info, table_pfn);
    std::map<uint64_t, std::vector<std::byte>> overlay;
    std::vector<std::byte> page(guest_ram().begin() + static_cast<long>(at / 4096 * 4096),
                                guest_ram().begin() + static_cast<long>(at / 4096 * 4096 + 4096));
    std::byte* sp = page.data() + at % 4096;
    const uint64_t zero = 0;
    const int32_t buddy = static_cast<int32_t>(*info.number("PAGE_BUDDY_MAPCOUNT_VALUE"));
    std::memcpy(sp + 0, &zero, 8);       // flags
    std::memcpy(sp + 8, &zero, 8);       // compound_head
    std::memcpy(sp + 40, &zero, 8);      // private: order 0
    std::memcpy(sp + 48, &buddy, 4);     // _mapcount: PageBuddy
    overlay[at / 4096] = page;

    RamPageSource source(guest_ram());
    kernel::PageSelection honest = kernel::select_pages(ram_input(source, &info), 31);
    kernel::PageSelection lied = kernel::select_pages(ram_input(source, &info, &overlay), 31);
    EXPECT_TRUE(honest.keep_pfn(table_pfn));
    EXPECT_TRUE(lied.keep_pfn(table_pfn));
    EXPECT_EQ(lied.protected_pages, honest.protected_pages + 1);
    EXPECT_EQ(lied.excluded[static_cast<size_t>(kernel::PageClass::free)],
              honest.excluded[static_cast<size_t>(kernel::PageClass::free)] + 1);
    EXPECT_EQ(lied.keep.count(), honest.keep.count());
}

// xen-dumpctl estimate prints the classes and what each level keeps, the
// same numbers as the library (and so as makedumpfile).
TEST(DumpLevel, EstimatePrintsEveryLevel) {
    LevelDump& d = plain_dump();
    RunResult r = run({"xen-dumpctl", "estimate", "--json", d.dump.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["max_level"], 31);
    EXPECT_EQ(j["total_pages"], DumpReader::open(d.dump).nr_pages());
    // kept_pages are a compact file's (zero pages kept as its shared zero
    // page); makedumpfile counts a level with bit 1 without its zero pages.
    std::map<unsigned, uint64_t> printed;
    for (const auto& l : j["levels"]) {
        const unsigned level = l["level"].get<unsigned>();
        const uint64_t kept = l["kept_pages"].get<uint64_t>(), zero = l["zero_pages"].get<uint64_t>();
        EXPECT_EQ(l["kept_bytes"].get<uint64_t>(), (kept - zero) * 4096) << level;
        if (level == 0) {
            EXPECT_EQ(kept, j["total_pages"].get<uint64_t>());
            continue;
        }
        printed[level] = (level & kernel::kExcludeZero) ? kept - zero : kept;
    }
    EXPECT_EQ(printed, kPlainKept);
    // Level 31 keeps what no class took.
    uint64_t excluded = 0;
    for (const auto& [name, n] : j["classes"].items()) excluded += n.get<uint64_t>();
    EXPECT_EQ(j["total_pages"].get<uint64_t>() - excluded, kPlainKept.at(31));
    RunResult text = run({"xen-dumpctl", "estimate", d.dump.string()});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("\n31     " ), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("FREE "), std::string::npos) << text.out;
    // --dump-level N adds level N's row: 5 (bits 1 and 4) keeps what 4 keeps.
    RunResult five = run({"xen-dumpctl", "estimate", "--json", "--dump-level", "5", d.dump.string()});
    ASSERT_EQ(five.exit_code, 0) << five.err;
    const json with_five = json::parse(five.out);
    std::map<unsigned, json> rows;
    for (const auto& l : with_five["levels"]) rows[l["level"].get<unsigned>()] = l;
    ASSERT_TRUE(rows.contains(5) && rows.contains(4)) << five.out;
    EXPECT_EQ(rows[5]["kept_pages"], rows[4]["kept_pages"]);
    EXPECT_EQ(rows[5]["applied_level"], 5);
    // A level beyond 31 is refused before any dump is looked for.
    RunResult bad = run({"xen-dumpctl", "estimate", "--dump-level", "32", "/nonexistent.core"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--dump-level wants a number from 0 to 31"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace xendump::test
