// PV p2m discovery over every layout and guest width: the pages found must
// be exactly the guest's extents.
#include <gtest/gtest.h>

#include "windowed_check.hpp"
#include "fake_hypervisor.hpp"
#include "p2m/p2m.hpp"

namespace xendump::test {
namespace {

struct Case {
    unsigned width;
    P2mLayout layout;
    format::P2mKind expected_kind;
};

std::string name_of(const testing::TestParamInfo<Case>& info) {
    const char* layout = info.param.layout == P2mLayout::tree ? "tree" : info.param.layout == P2mLayout::linear ? "linear" : "both";
    return std::string(layout) + std::to_string(info.param.width * 8);
}

class PvLayout : public testing::TestWithParam<Case> {};

bool same_pages(const std::vector<PageEntry>& a, const std::vector<PageEntry>& b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(),
                      [](const PageEntry& x, const PageEntry& y) { return x.pfn == y.pfn && x.gmfn == y.gmfn; });
}

TEST_P(PvLayout, FindsExactlyTheExtents) {
    const Case c = GetParam();
    FakeHypervisor hv;
    PvGuestSpec spec;
    spec.width = c.width;
    spec.layout = c.layout;
    // Several p2m pages and more than one frame list for 32-bit too; holes
    // between the extents and at the end of the p2m.
    spec.p2m_size = 600000;
    spec.extents = {{0, 0x100000, 160}, {256, 0x200000, 300000}, {400000, 0x300000, 150000}};
    PvGuest g = build_pv_guest(hv, spec);

    P2mMap map = discover_checked(hv, *hv.domain_info(spec.domid));
    EXPECT_EQ(map.kind, c.expected_kind);
    EXPECT_EQ(map.p2m_size, spec.p2m_size);
    EXPECT_EQ(map.guest_width, c.width);
    EXPECT_TRUE(same_pages(map.pages, g.expected)) << map.pages.size() << " pages, expected " << g.expected.size();
    EXPECT_TRUE(map.warnings.empty()) << map.warnings.front();
    EXPECT_EQ(map.p2m_frames, g.p2m_page_mfns);
    EXPECT_EQ(map.shared_info.size(), 4096u);
    // Batched: never one mapping call per page.
    EXPECT_LT(hv.map_calls, 100u);
}

INSTANTIATE_TEST_SUITE_P(All, PvLayout,
                         testing::Values(Case{8, P2mLayout::tree, format::P2mKind::tree},
                                         Case{4, P2mLayout::tree, format::P2mKind::tree},
                                         Case{8, P2mLayout::linear, format::P2mKind::linear},
                                         Case{4, P2mLayout::linear, format::P2mKind::linear},
                                         Case{8, P2mLayout::both, format::P2mKind::linear},
                                         Case{4, P2mLayout::both, format::P2mKind::linear}),
                         name_of);

TEST(PvLayout, MaxPfnSmallerThanHypervisorSizeIsUsed) {
    FakeHypervisor hv;
    PvGuestSpec spec;
    spec.p2m_size = 4096;
    spec.extents = {{0, 0x1000, 4096}};
    PvGuest g = build_pv_guest(hv, spec);
    set_arch_field(hv, g, 8, 0, 1024);
    P2mMap map = discover_checked(hv, *hv.domain_info(spec.domid));
    EXPECT_EQ(map.p2m_size, 1024u);
    ASSERT_EQ(map.pages.size(), 1024u);
    EXPECT_EQ(map.pages.back().pfn, 1023u);
}

TEST(PvLayout, MaxPfnLargerThanHypervisorSizeWarns) {
    FakeHypervisor hv;
    PvGuestSpec spec;
    spec.p2m_size = 2048;
    spec.extents = {{0, 0x1000, 2048}};
    PvGuest g = build_pv_guest(hv, spec);
    set_arch_field(hv, g, 8, 0, 1u << 20);
    P2mMap map = discover_checked(hv, *hv.domain_info(spec.domid));
    EXPECT_EQ(map.p2m_size, 2048u);
    EXPECT_EQ(map.pages.size(), 2048u);
    ASSERT_EQ(map.warnings.size(), 1u);
    EXPECT_NE(map.warnings[0].find("max_pfn"), std::string::npos) << map.warnings[0];
}

TEST(PvLayout, GenerationChangeIsNotSeenWhenStable) {
    FakeHypervisor hv;
    PvGuestSpec spec;
    spec.p2m_size = 1024;
    spec.layout = P2mLayout::linear;
    spec.extents = {{0, 0x1000, 1024}};
    PvGuest g = build_pv_guest(hv, spec);
    set_arch_field(hv, g, 8, 5, 42);
    P2mMap map = discover_checked(hv, *hv.domain_info(spec.domid));
    EXPECT_TRUE(map.warnings.empty());
}

}  // namespace
}  // namespace xendump::test
