// HVM/PVH discovery: pfn = gfn, present when it maps; the VGA hole and the
// MMIO window below 4 GiB are never probed.
#include <gtest/gtest.h>

#include "windowed_check.hpp"
#include "fake_hypervisor.hpp"
#include "p2m/p2m.hpp"

namespace xendump::test {
namespace {

TEST(Translated, FindsPopulatedGfnsAndSkipsDeviceHoles) {
    FakeHypervisor hv;
    auto& d = hv.add_domain(3, true, 8);
    // Populated across the VGA hole and the MMIO window: those must still be
    // skipped (xg_core_x86.c xc_core_arch_gpfn_may_present).
    hv.populate(3, 0, 0x10000, 0x100);          // 0 … 0xff, includes 0xa0-0xbf
    hv.populate(3, 0x100, 0x20000, 0x7ff00);    // up to 2 GiB
    hv.populate(3, 0xeff00, 0x100000, 0x200);   // straddles 0xf0000
    hv.populate(3, 0x100000, 0x200000, 0x40000); // 4 GiB … 5 GiB
    d.info.tot_pages = 0x100 + 0x7ff00 + 0x200 + 0x40000;
    d.info.max_pages = d.info.tot_pages;
    d.max_gpfn = 0x13ffff;

    P2mMap map = discover_checked(hv, d.info);
    EXPECT_EQ(map.kind, format::P2mKind::translated);
    EXPECT_EQ(map.p2m_size, 0x140000u);
    uint64_t expected = 0;
    uint64_t prev = 0;
    bool first = true;
    for (const PageEntry& e : map.pages) {
        EXPECT_EQ(e.pfn, e.gmfn);
        EXPECT_FALSE(e.pfn >= 0xa0 && e.pfn < 0xc0) << e.pfn;
        EXPECT_FALSE(e.pfn >= 0xf0000 && e.pfn < 0x100000) << e.pfn;
        if (!first) {
            EXPECT_GT(e.pfn, prev);
        }
        prev = e.pfn;
        first = false;
    }
    expected = (0x100 - 0x20) + 0x7ff00 + 0x100 /* 0xeff00 … 0xeffff */ + 0x40000;
    EXPECT_EQ(map.pages.size(), expected);
    EXPECT_LE(hv.largest_batch, 8192u);
    EXPECT_LE(hv.map_calls, 0x140000u / 8192 + 4);
    EXPECT_TRUE(map.warnings.empty());
}

TEST(Translated, HugeMaximumGpfnIsBoundedByTheDomainsSize) {
    FakeHypervisor hv;
    auto& d = hv.add_domain(4, true, 8);
    hv.populate(4, 0, 0x1000, 0x4000);
    hv.populate(4, uint64_t{1} << 36, 0x9000000, 1);  // a frame placed absurdly high
    d.info.tot_pages = 0x4001;
    d.info.max_pages = 0x4001;
    d.max_gpfn = uint64_t{1} << 36;

    P2mMap map = discover_checked(hv, d.info);
    EXPECT_EQ(map.p2m_size, p2m_size_limit(d.info));
    EXPECT_LT(map.p2m_size, uint64_t{1} << 24);
    EXPECT_EQ(map.pages.size(), 0x4000u - 0x20);
    ASSERT_EQ(map.warnings.size(), 1u);
    EXPECT_NE(map.warnings[0].find("implausible"), std::string::npos) << map.warnings[0];
}

TEST(Translated, NothingPopulatedIsAnError) {
    FakeHypervisor hv;
    auto& d = hv.add_domain(5, true, 8);
    d.info.tot_pages = 10;
    d.max_gpfn = 0x1000;
    EXPECT_THROW(discover_windowed(hv, d.info), Error);
    try {
        discover_p2m(hv, d.info);
        FAIL() << "expected an Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), "domain 5");
        EXPECT_NE(std::string(e.what()).find("no present page"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace xendump::test
