// HVM/PVH discovery: pfn = gfn, present when the hypervisor's page type says
// so (nothing mapped), or when it maps where the hypervisor refuses page
// types; the VGA hole and the MMIO window below 4 GiB are never probed.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "windowed_check.hpp"
#include "fake_hypervisor.hpp"
#include "p2m/p2m.hpp"

namespace xendump::test {
namespace {

// 0x140000 gfns, populated across the VGA hole and the MMIO window: those
// must still be skipped (xg_core_x86.c xc_core_arch_gpfn_may_present).
FakeHypervisor::Domain& holey_guest(FakeHypervisor& hv) {
    auto& d = hv.add_domain(3, true, 8);
    hv.populate(3, 0, 0x10000, 0x100);          // 0 … 0xff, includes 0xa0-0xbf
    hv.populate(3, 0x100, 0x20000, 0x7ff00);    // up to 2 GiB
    hv.populate(3, 0xeff00, 0x100000, 0x200);   // straddles 0xf0000
    hv.populate(3, 0x100000, 0x200000, 0x40000); // 4 GiB … 5 GiB
    d.info.tot_pages = 0x100 + 0x7ff00 + 0x200 + 0x40000;
    d.info.max_pages = d.info.tot_pages;
    d.max_gpfn = 0x13ffff;
    return d;
}

// What holey_guest() must give: no gfn of a device hole, ascending.
void expect_holey_guest_pages(const P2mMap& map) {
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
}

TEST(Translated, FindsPopulatedGfnsByTheirTypesAndSkipsDeviceHoles) {
    FakeHypervisor hv;
    auto& d = holey_guest(hv);
    P2mMap map = discover_checked(hv, d.info);
    expect_holey_guest_pages(map);
    // Nothing mapped: the page types tell, 8192 gfns a call (the backend
    // splits them into its hypercalls). The device holes are typed too, to
    // count the domain's pages there, but never mapped or dumped.
    EXPECT_EQ(hv.map_calls, 0u);
    EXPECT_LE(hv.type_calls, 0x140000u / 8192 + 6);
    EXPECT_EQ(hv.typed_gfns, 0x140000u);
    EXPECT_TRUE(map.warnings.empty());
}

// Xen under an XSM policy that forbids getpageframeinfo3 (EPERM), or a
// backend without page types (EOPNOTSUPP): the gfns are mapped instead, as
// before, with a warning; the pages found are the same.
TEST(Translated, RefusedPageTypesFallBackToMappingWithAWarning) {
    for (int refusal : {EPERM, EOPNOTSUPP, ENOSYS}) {
        FakeHypervisor hv;
        auto& d = holey_guest(hv);
        hv.refuse_types = refusal;
        P2mMap map = discover_checked(hv, d.info);
        expect_holey_guest_pages(map);
        EXPECT_EQ(hv.type_calls, 0u);
        EXPECT_LE(hv.largest_batch, 8192u);
        EXPECT_LE(hv.map_calls, 0x140000u / 8192 + 4);
        EXPECT_EQ(hv.mapped_frames, 0x140000u - 0x20 - 0x10000);
        ASSERT_EQ(map.warnings.size(), 1u);
        EXPECT_NE(map.warnings[0].find("refused the page-type query"), std::string::npos) << map.warnings[0];
        EXPECT_NE(map.warnings[0].find(std::strerror(refusal)), std::string::npos) << map.warnings[0];
    }
}

// Xen's own pages in the guest's physmap (Linux HVM's shared_info on a low
// RAM gfn, PVH grant frames on ballooned-out RAM) are typed XTAB but map, and
// xl dump-core keeps them: the absent gfns of holes in RAM (at most 8192) and
// of a short tail are mapped to find them; a long gap is not.
TEST(Translated, XenPagesInHolesOfRamAreFoundByMappingTheHoles) {
    FakeHypervisor hv;
    auto& d = holey_guest(hv);
    // RAM ends at 0x13ffff; 0x140000 … 0x1400ff: a short tail with a grant frame.
    hv.populate(3, 0x140080, 0x300000, 1);
    d.max_gpfn = 0x1400ff;
    d.xen_pages = {0x1, 0x12345, 0x140080};
    // A hole of 3 in RAM around 0x50000, one of 8193 around 0x60000 (longer
    // than 8192: not looked into).
    // Machine frames follow the gfns (mfn = 0x20000 + gfn - 0x100), so that
    // no two ranges of frames overlap.
    hv.populate(3, 0x50001, 0x20000 + 0x50001 - 0x100, 1);  // a Xen page in it
    d.xen_pages.insert(0x50001);
    hv.populate(3, 0x100, 0x20000, 0x4ff00);  // RAM 0x100 … 0x4ffff instead of … 0x7ffff
    hv.populate(3, 0x50003, 0x20000 + 0x50003 - 0x100, 0xffff);  // 0x50003 … 0x60001
    hv.populate(3, 0x62003, 0x20000 + 0x62003 - 0x100, 0x7ff00 - 0x61f03);
    hv.populate(3, 0x61000, 0x20000 + 0x61000 - 0x100, 1);  // in the long hole: not found
    d.xen_pages.insert(0x61000);
    P2mMap map = discover_checked(hv, d.info);
    std::set<uint64_t> pfns;
    for (const PageEntry& e : map.pages) pfns.insert(e.pfn);
    for (uint64_t x : {0x1, 0x12345, 0x50001, 0x140080}) EXPECT_TRUE(pfns.count(x)) << std::hex << x;
    EXPECT_FALSE(pfns.count(0x61000));
    EXPECT_FALSE(pfns.count(0x50000));
    EXPECT_FALSE(pfns.count(0x60002));
    // Mapped: the four short holes' gfns (1, 1, 3, and the tail of 0x100), not the gaps.
    EXPECT_EQ(hv.mapped_frames, 1u + 1 + 3 + 0x100);
    EXPECT_TRUE(map.warnings.empty());
}

// A cancel (an Error without an errno) while the types are asked is no
// refusal: it ends the discovery instead of turning to mapping.
TEST(Translated, AnErrorWithoutErrnoIsNotARefusal) {
    struct Cancelled : FakeHypervisor {
        std::vector<GfnType> gfn_types(uint32_t domid, std::span<const uint64_t>) override {
            throw Error("cancelled", "domain " + std::to_string(domid));
        }
    } hv;
    auto& d = holey_guest(hv);
    EXPECT_THROW(discover_p2m(hv, d.info), Error);
    EXPECT_EQ(hv.map_calls, 0u);
}

// Broken pages (XEN_DOMCTL_PFINFO_BROKEN) are left out, never mapped, and
// counted in one warning.
TEST(Translated, BrokenPagesAreLeftOutWithAWarning) {
    FakeHypervisor hv;
    auto& d = holey_guest(hv);
    d.broken = {0x1234, 0x1235, 0x100010};
    P2mMap map = discover_checked(hv, d.info);
    EXPECT_EQ(map.pages.size(), (0x100u - 0x20) + 0x7ff00 + 0x100 + 0x40000 - 3);
    for (const PageEntry& e : map.pages) EXPECT_FALSE(d.broken.count(e.pfn)) << e.pfn;
    EXPECT_EQ(hv.map_calls, 0u);
    ASSERT_EQ(map.warnings.size(), 1u);
    EXPECT_NE(map.warnings[0].find("3 gfns are broken pages"), std::string::npos) << map.warnings[0];
    EXPECT_NE(map.warnings[0].find("gfn 0x1234"), std::string::npos) << map.warnings[0];
}

// A 128 MiB guest as Xen builds one: RAM at gfns 0 … 0x7fff, Xen's special
// pages just below the MMIO window (0xfeff8 … 0xfefff, the highest gfn).
FakeHypervisor::Domain& small_guest(FakeHypervisor& hv, uint64_t tot_pages) {
    auto& d = hv.add_domain(6, true, 8);
    hv.populate(6, 0, 0x10000, 0x8000);
    hv.populate(6, 0xfeff8, 0x30000, 8);
    d.info.tot_pages = tot_pages;
    d.info.max_pages = 0x8000 + 8;
    d.max_gpfn = 0xfefff;
    return d;
}

// Once every page the domain owns is found (its device windows typed first,
// so that the special pages count), the scan ends 8192 gfns later: 0xa000
// gfns typed of 0xff000, and the same pages found.
TEST(Translated, TheScanEndsOnceEveryPageTheDomainOwnsIsFound) {
    FakeHypervisor hv;
    auto& d = small_guest(hv, 0x8000 + 8);
    P2mMap map = discover_checked(hv, d.info);
    EXPECT_EQ(map.p2m_size, 0xff000u);
    EXPECT_EQ(map.pages.size(), 0x8000u - 0x20);
    EXPECT_EQ(map.pages.back().pfn, 0x7fffu);
    const uint64_t windows = 0x20 + (0xff000 - 0xf0000);
    // RAM less the VGA hole (typed with the windows), then the tail.
    EXPECT_EQ(hv.typed_gfns, windows + 0x8000 - 0x20 + 8192);
    // Nothing mapped: the gfns after RAM are a gap (far from the highest gfn).
    EXPECT_EQ(hv.mapped_frames, 0u);
    EXPECT_TRUE(map.warnings.empty());
}

// A page the scan cannot find (one in a populate-on-demand cache, say): the
// scan goes on to the highest gfn, as before, and finds the same pages.
TEST(Translated, APageThatCannotBeFoundMeansTheWholeScan) {
    FakeHypervisor hv;
    auto& d = small_guest(hv, 0x8000 + 8 + 1);
    P2mMap map = discover_checked(hv, d.info);
    EXPECT_EQ(map.pages.size(), 0x8000u - 0x20);
    EXPECT_EQ(hv.typed_gfns, 0xff000u);
    EXPECT_EQ(hv.mapped_frames, 0u);
}

// Gfns backed by pages the domain shares (mem_sharing) are typed present but
// left out of tot_pages: counted through shr_pages, or the scan would end
// before the pages above them.
TEST(Translated, SharedPagesAreCountedSoThatNothingAboveThemIsMissed) {
    FakeHypervisor hv;
    // 0x100 of its RAM's gfns are shared (left out of tot_pages), and it
    // owns 0x100 pages far above RAM.
    auto& d = small_guest(hv, 0x8000 + 8 - 0x100 + 0x100);
    hv.populate(6, 0x20000, 0x60000, 0x100);
    d.info.shr_pages = 0x100;
    P2mMap map = discover_checked(hv, d.info);
    EXPECT_EQ(map.pages.size(), 0x8000u - 0x20 + 0x100);
    EXPECT_EQ(map.pages.back().pfn, 0x200ffu);
    EXPECT_LT(hv.typed_gfns, 0xff000u);
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
