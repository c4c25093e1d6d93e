// kallsyms decoded from the real fixture's RAM, checked against its
// vmcoreinfo and its own memory (no vmlinux or System.map involved).
#include "xendump/kernel/kallsyms.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>

#include "guest_ram.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"

using namespace xendump;
using namespace xendump::kernel;

namespace {

const Vmcoreinfo& fixture_vmcoreinfo() {
    static const Vmcoreinfo info = [] {
        test::RamPageSource source(test::guest_ram());
        auto r = find_vmcoreinfo(source);
        if (!r) throw std::runtime_error("no vmcoreinfo in the fixture");
        return r->info;
    }();
    return info;
}

// The same text without the SYMBOL(kallsyms_*) lines some kernels add: forces the shape search.
Vmcoreinfo without_kallsyms_lines(const Vmcoreinfo& info) {
    std::string text, line;
    for (char c : info.text()) {
        line += c;
        if (c != '\n') continue;
        if (!line.starts_with("SYMBOL(kallsyms_")) text += line;
        line.clear();
    }
    auto stripped = Vmcoreinfo::parse(text);
    if (!stripped) throw std::runtime_error("stripped text does not parse");
    return *stripped;
}

const Kallsyms& fixture_kallsyms() {
    static const Kallsyms k = [] {
        auto r = find_kallsyms(test::ram_reader(test::guest_ram()), &fixture_vmcoreinfo());
        if (!r) throw std::runtime_error("kallsyms not found");
        return *r;
    }();
    return k;
}

void expect_banner(const Kallsyms& k) {
    PhysicalMemory mem(test::ram_reader(test::guest_ram()));
    auto banner = read_linux_banner(mem, k);
    ASSERT_TRUE(banner);
    EXPECT_TRUE(banner->starts_with("Linux version 6.1")) << *banner;
}

}  // namespace

TEST(KallsymsFixture, DecodesAPlausibleTable) {
    const auto& k = fixture_kallsyms();
    EXPECT_GT(k.table.size(), 50000u);
    EXPECT_TRUE(k.phys_base_from_vmcoreinfo);
    EXPECT_EQ(k.phys_base, 0u);
    EXPECT_TRUE(k.where.absolute_percpu);  // x86_64 SMP
    EXPECT_TRUE(k.where.marker_size == 4 || k.where.marker_size == 8);
    // Every name is non-empty printable text and every type an nm letter.
    for (const auto& s : k.table.symbols()) {
        ASSERT_FALSE(s.name.empty());
        ASSERT_TRUE(std::isalpha(static_cast<unsigned char>(s.type))) << s.name << " " << s.type;
    }
    const KernelSymbol* start = k.table.find("_stext");
    ASSERT_NE(start, nullptr);
    EXPECT_EQ(std::toupper(start->type), 'T');
}

TEST(KallsymsFixture, EveryVmcoreinfoSymbolThatKallsymsHoldsMatches) {
    const auto& k = fixture_kallsyms();
    size_t compared = 0;
    for (const auto& [name, value] : fixture_vmcoreinfo().symbols()) {
        if (!is_kernel_image_address(value)) continue;  // e.g. mem_section: a pointer's value
        const KernelSymbol* s = k.table.find(name);
        if (s == nullptr) continue;
        EXPECT_EQ(s->address, value) << name;
        ++compared;
    }
    EXPECT_GE(compared, 8u);  // init_uts_ns, swapper_pg_dir, _stext, prb, node_data, ...
    EXPECT_EQ(k.verified_symbols, compared);
}

TEST(KallsymsFixture, LinuxBannerPointsAtTheBannerText) {
    const auto& k = fixture_kallsyms();
    auto virt = k.table.address("linux_banner");
    ASSERT_TRUE(virt);
    const uint64_t phys = kernel_virt_to_phys(*virt, fixture_vmcoreinfo().phys_base());
    auto ram = test::guest_ram();
    ASSERT_LT(phys + 20, ram.size());
    EXPECT_EQ(std::memcmp(ram.data() + phys, "Linux version 6.1", 17), 0);
    expect_banner(k);
}

TEST(KallsymsFixture, InitUtsNsResolvesToTheRunningRelease) {
    const auto& k = fixture_kallsyms();
    auto uts = k.table.address("init_uts_ns");
    ASSERT_TRUE(uts);
    EXPECT_EQ(uts, fixture_vmcoreinfo().symbol("init_uts_ns"));
    PhysicalMemory mem(test::ram_reader(test::guest_ram()));
    // struct new_utsname: sysname[65], nodename[65], release[65] at name (offset 0 here).
    auto sysname = mem.c_string(kernel_virt_to_phys(*uts, 0), 64);
    auto release = mem.c_string(kernel_virt_to_phys(*uts, 0) + 130, 64);
    EXPECT_EQ(sysname, "Linux");
    EXPECT_EQ(release, std::string(fixture_vmcoreinfo().release()));
}

TEST(KallsymsFixture, PerCpuSymbolsWithAndWithoutPrefix) {
    const auto& t = fixture_kallsyms().table;
    for (const char* name : {"runqueues", "current_task"}) {
        auto plain = t.address(name);
        ASSERT_TRUE(plain) << name;
        EXPECT_EQ(t.address(std::string("per_cpu__") + name), plain) << name;
        // x86_64 per-cpu symbols are offsets into the per-cpu area.
        EXPECT_GE(*plain, *t.address("__per_cpu_start")) << name;
        EXPECT_LT(*plain, *t.address("__per_cpu_end")) << name;
    }
    // The alias is only for per-cpu variables.
    EXPECT_FALSE(t.address("per_cpu__init_uts_ns"));
    EXPECT_FALSE(t.address("no_such_symbol_anywhere"));
}

TEST(KallsymsFixture, AddressResolvesToSymbolPlusOffset) {
    const auto& t = fixture_kallsyms().table;
    const uint64_t a = *t.address("init_uts_ns");
    auto r = t.resolve(a + 0x10);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->offset, 0x10u);
    EXPECT_EQ(r->symbol->address, a);
    EXPECT_EQ(t.describe(*t.address("_stext")), t.resolve(*t.address("_stext"))->symbol->name);
    EXPECT_NE(t.describe(a + 0x10).find("+0x10"), std::string::npos);
}

TEST(KallsymsFixture, ShapeSearchFindsTheSameTableWithoutKallsymsLines) {
    const Vmcoreinfo stripped = without_kallsyms_lines(fixture_vmcoreinfo());
    ASSERT_FALSE(stripped.symbol("kallsyms_token_index"));
    const auto t0 = std::chrono::steady_clock::now();
    auto k = find_kallsyms(test::ram_reader(test::guest_ram()), &stripped);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(k);
    std::cout << "kallsyms shape search from _stext: " << ms << " ms\n";
    EXPECT_EQ(k->table.size(), fixture_kallsyms().table.size());
    EXPECT_EQ(k->where.token_index, fixture_kallsyms().where.token_index);
    EXPECT_EQ(k->where.token_index,
              kernel_virt_to_phys(*fixture_vmcoreinfo().symbol("kallsyms_token_index"), 0));
    EXPECT_EQ(k->where.names, kernel_virt_to_phys(*fixture_vmcoreinfo().symbol("kallsyms_names"), 0));
    EXPECT_EQ(k->where.offsets, kernel_virt_to_phys(*fixture_vmcoreinfo().symbol("kallsyms_offsets"), 0));
    EXPECT_GT(k->verified_symbols, 0u);
}

TEST(KallsymsFixture, WithoutVmcoreinfoPhysBaseIsDerived) {
    auto k = find_kallsyms(test::ram_reader(test::guest_ram()), nullptr);
    ASSERT_TRUE(k);
    EXPECT_FALSE(k->phys_base_from_vmcoreinfo);
    EXPECT_EQ(k->phys_base, 0u);
    EXPECT_EQ(k->table.size(), fixture_kallsyms().table.size());
    expect_banner(*k);
}

TEST(KallsymsFixture, ContradictingVmcoreinfoRejectsTheTable) {
    std::string text = without_kallsyms_lines(fixture_vmcoreinfo()).text();
    const std::string key = "SYMBOL(init_uts_ns)=ffffffff82";
    const size_t at = text.find(key);
    ASSERT_NE(at, std::string::npos);
    text[at + key.size()] = text[at + key.size()] == '0' ? '1' : '0';
    auto wrong = Vmcoreinfo::parse(text);
    ASSERT_TRUE(wrong);
    EXPECT_FALSE(find_kallsyms(test::ram_reader(test::guest_ram()), &*wrong));
}

TEST(Kallsyms, PatternPagesFindNothing) {
    std::vector<std::byte> page(kPageSize);
    PageReader reader = [&](uint64_t pfn, PageSpan out) {
        if (pfn >= 8192) return false;  // 32 MiB of pattern
        test::fill_pattern_page(3, pfn, out.data());
        return true;
    };
    KallsymsOptions options;
    options.scan_start = 0;
    EXPECT_FALSE(find_kallsyms(reader, nullptr, options));
}

TEST(Kallsyms, ZeroMemoryFindsNothing) {
    PageReader reader = [](uint64_t pfn, PageSpan out) {
        std::fill(out.begin(), out.end(), std::byte{0});
        return pfn < 4096;
    };
    EXPECT_FALSE(find_kallsyms(reader, nullptr, KallsymsOptions{0, 64ULL << 20}));
}

// Issue 16.4: kallsyms look-alikes (a token table and a valid token index,
// 1 KiB each, back to back over 400 KiB) above 64 MiB of present memory, so
// that every one of them walks back over all of it looking for
// kallsyms_relative_base. The old search did that 400 times (276 s for this
// test on a loaded machine; 74 s for `xen-dumpctl info` in issue 16); the
// work limit bounds it.
namespace {

constexpr uint64_t kFillerPages = (64ULL << 20) / kPageSize;
constexpr uint64_t kLookAlikeBytes = 400 * 1024;

std::vector<std::byte> look_alike_tables() {
    std::vector<std::byte> bytes(kLookAlikeBytes);
    for (size_t at = 0; at + 1024 <= bytes.size(); at += 1024) {
        // kallsyms_token_table: 256 one-character tokens; kallsyms_token_index: 0, 2, 4, ...
        for (size_t i = 0; i < 256; ++i) {
            bytes[at + 2 * i] = static_cast<std::byte>(0x21 + i % 90);
            const uint16_t index = static_cast<uint16_t>(2 * i);
            std::memcpy(bytes.data() + at + 512 + 2 * i, &index, 2);
        }
    }
    return bytes;
}

PageReader look_alike_reader(const std::vector<std::byte>& tables) {
    return [&tables](uint64_t pfn, PageSpan out) {
        std::fill(out.begin(), out.end(), std::byte{0});
        if (pfn < kFillerPages) return true;  // present, zero
        const uint64_t at = (pfn - kFillerPages) * kPageSize;
        if (at >= tables.size()) return false;
        std::memcpy(out.data(), tables.data() + at, std::min<size_t>(kPageSize, tables.size() - at));
        return true;
    };
}

}  // namespace

TEST(KallsymsHostile, LookAlikeTablesCostBoundedTime) {
    const auto tables = look_alike_tables();
    const KallsymsOptions options{0, (kFillerPages * kPageSize) + kLookAlikeBytes};
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(find_kallsyms(look_alike_reader(tables), nullptr, options));
    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(seconds, 10.0) << "the search over look-alikes is not bounded";
}

TEST(KallsymsHostile, WorkStopsAtTheLimit) {
    const auto tables = look_alike_tables();
    KallsymsOptions options{0, (kFillerPages * kPageSize) + kLookAlikeBytes};
    KallsymsSearchStats stats;
    EXPECT_FALSE(find_kallsyms(look_alike_reader(tables), nullptr, options, &stats));
    EXPECT_TRUE(stats.gave_up);
    EXPECT_GE(stats.table_candidates, 1u);
    EXPECT_LT(stats.table_candidates, kLookAlikeBytes / 1024) << "every look-alike was walked back from";
    // One charge (at most one names table, 64 MiB) past the limit.
    EXPECT_LE(stats.work, options.work_limit + (64ULL << 20) + 4096);

    options.work_limit = 16ULL << 20;  // a smaller limit stops sooner
    KallsymsSearchStats smaller;
    EXPECT_FALSE(find_kallsyms(look_alike_reader(tables), nullptr, options, &smaller));
    EXPECT_TRUE(smaller.gave_up);
    EXPECT_LT(smaller.table_candidates, stats.table_candidates);
}

TEST(KallsymsHostile, CancelStopsTheSearch) {
    const auto tables = look_alike_tables();
    std::atomic<bool> cancel{true};
    KallsymsOptions options{0, (kFillerPages * kPageSize) + kLookAlikeBytes};
    options.cancel = &cancel;
    EXPECT_THROW(find_kallsyms(look_alike_reader(tables), nullptr, options), Error);
}

TEST(KallsymsFixture, RealTablesNeedLittleOfTheWorkLimit) {
    const Vmcoreinfo stripped = without_kallsyms_lines(fixture_vmcoreinfo());
    KallsymsSearchStats stats;
    auto k = find_kallsyms(test::ram_reader(test::guest_ram()), &stripped, {}, &stats);
    ASSERT_TRUE(k);
    EXPECT_FALSE(stats.gave_up);
    std::cout << "kallsyms shape search over the fixture: " << stats.index_candidates << " index candidates, "
              << stats.table_candidates << " with a token table, " << (stats.work >> 10) << " KiB examined\n";
    EXPECT_LT(stats.work, KallsymsOptions{}.work_limit / 8);
    KallsymsSearchStats without;
    ASSERT_TRUE(find_kallsyms(test::ram_reader(test::guest_ram()), nullptr, {}, &without));
    EXPECT_FALSE(without.gave_up);
    EXPECT_LT(without.work, KallsymsOptions{}.work_limit / 8);
}
