// Issue 3: hostile guests. The p2m lives in guest memory; a crashing guest
// may be malicious. Each case ends within seconds, under a memory bound, with
// a dump that verifies or a clear error.
#include <gtest/gtest.h>

#include <algorithm>

#include "dump_support.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::test::dump {
namespace {

json base_pv(uint32_t domid, const std::string& fmt = "tree") {
    return pv_domain(domid, 8, fmt, 8192,
                     json::array({json::array({0, 0x100000 + domid * 0x10000, 4000}),
                                  json::array({4096, 0x100000 + domid * 0x10000 + 4096, 4000})}));
}

// Runs the one-shot dumper under a 512 MiB address-space limit and a hang
// guard; returns its result.
RunResult dump_bounded(const sim::Host& host, uint32_t domid, const std::filesystem::path& out) {
    return run({"timeout", "120", "prlimit", "--as=" + std::to_string(512ull << 20), "--",
                build_program("xen-dumpd").string(), "--host", host.host(), "--domain",
                std::to_string(domid), "-o", out.string(), "--quiet"});
}

TEST(Hostile, AnotherDomainsMfnIsUnreadableNeverItsContents) {
    json victim = base_pv(3);
    json attacker = base_pv(4);
    uint64_t foreign_mfn = victim["extents"][0][1].get<uint64_t>() + 10;
    attacker["p2m_overrides"] = json::array({json::array({100, foreign_mfn})});
    sim::Host host(host_spec({victim, attacker}));
    TempDir out;
    auto r = dump_bounded(host, 4, out / "a.core");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Each page is mapped once, while it is read: the hypervisor refuses the
    // victim's frame, so pfn 100 is listed as unreadable and stored as zeros.
    DumpReader dump = DumpReader::open(out / "a.core");
    EXPECT_TRUE(dump.verify().empty());
    EXPECT_EQ(dump.unreadable_pfns(), std::vector<uint64_t>{100});
    std::vector<std::byte> page(4096, std::byte{0xff});
    ASSERT_TRUE(dump.read_page_by_pfn(100, page));
    EXPECT_TRUE(std::all_of(page.begin(), page.end(), [](std::byte b) { return b == std::byte{0}; }));
    // Every other page is the attacker's own.
    auto expected = expected_pages(attacker, {100});
    EXPECT_EQ(dump.nr_pages(), expected.size() + 1);
    for (const auto& [pfn, gmfn] : expected) {
        auto i = dump.index_of_pfn(pfn);
        ASSERT_TRUE(i.has_value()) << pfn;
        EXPECT_EQ(dump.entries()[*i].gmfn, gmfn) << pfn;
    }
}

TEST(Hostile, DuplicateMfnIsDroppedWithWarning) {
    json dom = base_pv(5);
    uint64_t mfn_of_50 = dom["extents"][0][1].get<uint64_t>() + 50;
    dom["p2m_overrides"] = json::array({json::array({60, mfn_of_50})});
    sim::Host host(host_spec({dom}));
    TempDir out;
    std::vector<std::string> warnings;
    DumpOptions opt;
    opt.write.on_warning = [&](const std::string& w) { warnings.push_back(w); };
    dump_domain_to_file(*host.hv, 5, out / "d.core", opt);
    EXPECT_FALSE(warnings.empty());
    DumpReader r = DumpReader::open(out / "d.core");
    EXPECT_TRUE(r.verify().empty());
    // pfn 50 keeps its frame; pfn 60's claim of the same frame is dropped.
    EXPECT_TRUE(r.index_of_pfn(50).has_value());
    EXPECT_FALSE(r.index_of_pfn(60).has_value());
}

TEST(Hostile, GarbageAndInvalidEntriesAreHoles) {
    json dom = base_pv(6);
    dom["p2m_overrides"] = json::array({json::array({10, 0xFFFFFFFFFFFFFFFFull}),
                                        json::array({11, 0x7FFFFFFFFFFFFull}),
                                        json::array({12, 0x123456789ABCDEFull})});
    sim::Host host(host_spec({dom}));
    TempDir out;
    auto r = dump_bounded(host, 6, out / "g.core");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    check_dump_against_host(out / "g.core", host, 6, expected_pages(dom, {10, 11, 12}), true);
}

TEST(Hostile, HugeMaxPfnIsBoundedByTheHypervisor) {
    json dom = base_pv(7);
    dom["shared_info_overrides"] = json{{"max_pfn", 1ull << 40}};
    sim::Host host(host_spec({dom}));
    TempDir out;
    auto r = dump_bounded(host, 7, out / "m.core");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    check_dump_against_host(out / "m.core", host, 7, expected_pages(dom), true);
}

TEST(Hostile, FrameListListAtTheWrongLevelEndsCleanly) {
    // Point the root at a frame-list page: the walk meets structure pages at
    // the wrong level (a loop), which must end in a clear error or holes,
    // never a hang or unbounded memory.
    json dom = base_pv(8);
    sim::Host probe(host_spec({dom}));
    auto info = probe.hv->domain_info(8);
    uint64_t si = info->shared_info_frame;
    auto f = sim::read_frame(*probe.hv, 8, si);
    ASSERT_EQ(f.error, 0);
    uint64_t root = sim::word(f.bytes.data(), 3088 + 8);
    auto rootp = sim::read_frame(*probe.hv, 8, root);
    ASSERT_EQ(rootp.error, 0);
    uint64_t first_fl = sim::word(rootp.bytes.data(), 0);
    for (uint64_t target : {first_fl, root}) {
        json d2 = dom;
        d2["shared_info_overrides"] = json{{"pfn_to_mfn_frame_list_list", target}};
        sim::Host host(host_spec({d2}));
        TempDir out;
        auto r = dump_bounded(host, 8, out / "l.core");
        if (r.exit_code == 0) {
            DumpReader rd = DumpReader::open(out / "l.core");
            EXPECT_TRUE(rd.verify().empty());
        } else {
            EXPECT_EQ(r.exit_code, 1) << r.err;
            EXPECT_NE(r.err.find("domain 8"), std::string::npos) << r.err;
            EXPECT_FALSE(std::filesystem::exists(out / "l.core"));
        }
        EXPECT_FALSE(host.hv->domain_info(8)->paused) << "domain left paused";
    }
}

TEST(Hostile, LinearP2mWithGarbageCr3EndsCleanly) {
    json dom = base_pv(9, "linear");
    dom["shared_info_overrides"] = json{{"p2m_cr3", 0xDEADBEEF000ull}};
    sim::Host host(host_spec({dom}));
    TempDir out;
    auto r = dump_bounded(host, 9, out / "c.core");
    if (r.exit_code == 0) {
        EXPECT_TRUE(DumpReader::open(out / "c.core").verify().empty());
    } else {
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_NE(r.err.find("domain 9"), std::string::npos) << r.err;
    }
    EXPECT_FALSE(host.hv->domain_info(9)->paused);
}

}  // namespace
}  // namespace xendump::test::dump
