// discover_p2m against simulated hosts built by xen-dump-sim: the pages found
// must be the spec's extents (minus the device holes for HVM/PVH), whatever
// the layout and width, and the spec's hostile overrides end as holes.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "windowed_check.hpp"
#include "p2m/p2m.hpp"
#include "../sim/sim_test_util.hpp"
#include "test_support.hpp"

namespace xendump::test {
namespace {

// The sim suite's host helper: a host built by xen-dump-sim in a TempDir.
struct SimHost : sim::Host {
    using sim::Host::Host;
    P2mMap discover(uint32_t domid) { return discover_checked(*hv, *hv->domain_info(domid)); }
};

nlohmann::json domain(uint32_t domid, const std::string& type, unsigned width, uint64_t p2m_size,
                      const std::string& format, nlohmann::json extents) {
    nlohmann::json d = {{"domid", domid},       {"name", "g" + std::to_string(domid)},
                        {"type", type},         {"vcpus", 1},
                        {"p2m_size", p2m_size}, {"extents", std::move(extents)},
                        {"memory", {{"fill", "zero"}}}};
    if (type == "pv") {
        d["guest_width"] = width;
        d["p2m_format"] = format;
    }
    return d;
}

// Device holes never probed in translated guests (xg_core_x86.c).
bool device_hole(uint64_t pfn) { return (pfn >= 0xa0 && pfn < 0xc0) || (pfn >= 0xf0000 && pfn < 0x100000); }

std::vector<PageEntry> expected_pages(const nlohmann::json& d) {
    const bool translated = d["type"] != "pv";
    std::vector<PageEntry> out;
    for (const auto& ex : d["extents"]) {
        uint64_t pfn = ex[0], mfn = ex[1], count = ex[2];
        for (uint64_t i = 0; i < count; ++i) {
            if (translated && device_hole(pfn + i)) continue;
            out.push_back({pfn + i, translated ? pfn + i : mfn + i});
        }
    }
    std::sort(out.begin(), out.end(), [](const PageEntry& a, const PageEntry& b) { return a.pfn < b.pfn; });
    return out;
}

void expect_pages(const std::vector<PageEntry>& got, const std::vector<PageEntry>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].pfn, want[i].pfn) << "entry " << i;
        ASSERT_EQ(got[i].gmfn, want[i].gmfn) << "entry " << i;
    }
}

struct Layout {
    std::string type;
    unsigned width;
    std::string format;
    format::P2mKind kind;
};

class SimLayouts : public testing::TestWithParam<Layout> {};

TEST_P(SimLayouts, DiscoveryEqualsTheExtents) {
    const Layout& l = GetParam();
    nlohmann::json d = domain(7, l.type, l.width, 300000, l.format,
                              {{0, 0x100000, 160}, {256, 0x200000, 200000}, {250000, 0x300000, 40000}});
    SimHost host({{"xen_version", "4.17.0"}, {"domains", {d}}});
    P2mMap map = host.discover(7);
    EXPECT_EQ(map.kind, l.kind);
    EXPECT_EQ(map.p2m_size, 300000u);
    expect_pages(map.pages, expected_pages(d));
    EXPECT_TRUE(map.warnings.empty()) << map.warnings.front();
}

INSTANTIATE_TEST_SUITE_P(All, SimLayouts,
                         testing::Values(Layout{"pv", 8, "tree", format::P2mKind::tree},
                                         Layout{"pv", 4, "tree", format::P2mKind::tree},
                                         Layout{"pv", 8, "linear", format::P2mKind::linear},
                                         Layout{"pv", 4, "linear", format::P2mKind::linear},
                                         Layout{"pv", 8, "both", format::P2mKind::linear},
                                         Layout{"pv", 4, "both", format::P2mKind::linear},
                                         Layout{"hvm", 8, "", format::P2mKind::translated},
                                         Layout{"pvh", 8, "", format::P2mKind::translated}),
                         [](const testing::TestParamInfo<Layout>& i) {
                             return i.param.type + (i.param.format.empty() ? "" : "_" + i.param.format) +
                                    std::to_string(i.param.width * 8);
                         });

TEST(SimHostile, OverridesBecomeHolesWithWarnings) {
    nlohmann::json victim = domain(2, "pv", 8, 4096, "tree", {{0, 0x900000, 4096}});
    nlohmann::json d = domain(7, "pv", 8, 65536, "linear", {{0, 0x100000, 65536}});
    d["p2m_overrides"] = {{100, 0x900010},                // domain 2's frame
                          {200, 0x100000 + 300},          // pfn 300's frame
                          {301, 0x100000 + 300},          // and again
                          {400, uint64_t{0x00f0000000000000}}};  // garbage
    SimHost host({{"xen_version", "4.17.0"}, {"domains", {victim, d}}});
    P2mMap map = host.discover(7);
    auto has = [&](uint64_t pfn) {
        return std::any_of(map.pages.begin(), map.pages.end(), [&](const PageEntry& e) { return e.pfn == pfn; });
    };
    EXPECT_FALSE(has(100));
    // pfn 200 claims pfn 300's frame: nothing tells which claim is true, the
    // lower pfn keeps it and both later claims are dropped.
    EXPECT_TRUE(has(200));
    EXPECT_FALSE(has(300));
    EXPECT_FALSE(has(301));
    EXPECT_FALSE(has(400));
    EXPECT_EQ(map.warnings.size(), 3u);
}

TEST(SimHostile, BalloonedPagesAreHoles) {
    nlohmann::json d = domain(7, "pv", 4, 16384, "tree", {{0, 0x100000, 16384}});
    SimHost host({{"xen_version", "4.17.0"}, {"domains", {d}}});
    RunResult r = run({"xen-dump-sim", "balloon", host.dir.string(), "7", "1000", "24"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    P2mMap map = host.discover(7);
    EXPECT_EQ(map.pages.size(), 16384u - 24);
    EXPECT_TRUE(map.warnings.empty());
}

TEST(SimHostile, HugeMaxPfnIsBounded) {
    nlohmann::json d = domain(7, "pv", 8, 8192, "tree", {{0, 0x100000, 8192}});
    d["shared_info_overrides"] = {{"max_pfn", uint64_t{1} << 40}};
    SimHost host({{"xen_version", "4.17.0"}, {"domains", {d}}});
    P2mMap map = host.discover(7);
    EXPECT_EQ(map.pages.size(), 8192u);
    EXPECT_FALSE(map.warnings.empty());
}

}  // namespace
}  // namespace xendump::test
