// Guests that lie: every case ends in holes with one aggregated warning, or
// in an Error naming the domain, quickly and in bounded memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <span>

#include "windowed_check.hpp"
#include "fake_hypervisor.hpp"
#include "p2m/p2m.hpp"
#include "p2m/page_extents.hpp"

namespace xendump::test {
namespace {

constexpr uint64_t kOtherDomainMfn = 0x5000000;

PvGuestSpec small_guest(P2mLayout layout, unsigned width = 8) {
    PvGuestSpec spec;
    spec.width = width;
    spec.layout = layout;
    spec.p2m_size = 8192;
    spec.extents = {{0, 0x100000, 8192}};
    return spec;
}

bool has_pfn(const P2mMap& map, uint64_t pfn) {
    return std::any_of(map.pages.begin(), map.pages.end(), [&](const PageEntry& e) { return e.pfn == pfn; });
}

std::string warning_with(const P2mMap& map, const std::string& text) {
    for (const std::string& w : map.warnings)
        if (w.find(text) != std::string::npos) return w;
    return {};
}

std::string error_of(FakeHypervisor& hv, uint32_t domid) {
    // The windowed walk fails with the same error.
    std::string windowed;
    try {
        discover_windowed(hv, *hv.domain_info(domid));
    } catch (const Error& e) {
        windowed = e.what();
    }
    try {
        discover_p2m(hv, *hv.domain_info(domid));
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), "domain " + std::to_string(domid));
        EXPECT_EQ(windowed, e.what());
        return e.what();
    }
    return {};
}

TEST(Hostile, AnotherDomainsFrameIsAHole) {
    FakeHypervisor hv;
    hv.add_domain(2, false, 8);
    hv.own(2, kOtherDomainMfn, 16);
    PvGuestSpec spec = small_guest(P2mLayout::tree);
    spec.p2m_overrides = {{10, kOtherDomainMfn}, {11, kOtherDomainMfn + 1}};
    build_pv_guest(hv, spec);

    P2mMap map = discover_checked(hv, *hv.domain_info(1));
    EXPECT_FALSE(has_pfn(map, 10));
    EXPECT_FALSE(has_pfn(map, 11));
    EXPECT_TRUE(has_pfn(map, 12));
    EXPECT_EQ(map.pages.size(), 8190u);
    std::string w = warning_with(map, "does not own");
    EXPECT_NE(w.find("2 pfns"), std::string::npos) << w;
    EXPECT_NE(w.find("0xa"), std::string::npos) << w;  // the first one is named

    // Without verification the frame is kept (the reader must then cope).
    P2mMap unverified = discover_checked(hv, *hv.domain_info(1), P2mOptions{.verify_frames = false});
    EXPECT_TRUE(has_pfn(unverified, 10));
}

TEST(Hostile, DuplicateFrameKeepsTheLowestPfn) {
    FakeHypervisor hv;
    PvGuestSpec spec = small_guest(P2mLayout::linear);
    spec.p2m_overrides = {{5000, 0x100000 + 7}, {6000, 0x100000 + 7}};  // pfn 7's frame
    build_pv_guest(hv, spec);

    P2mMap map = discover_checked(hv, *hv.domain_info(1));
    EXPECT_TRUE(has_pfn(map, 7));
    EXPECT_FALSE(has_pfn(map, 5000));
    EXPECT_FALSE(has_pfn(map, 6000));
    std::string w = warning_with(map, "already names");
    EXPECT_NE(w.find("2 pfns"), std::string::npos) << w;
    EXPECT_NE(w.find("pfn 0x1388 -> mfn 0x100007, already pfn 0x7"), std::string::npos) << w;  // the lowest duplicate
    // No gmfn twice.
    std::vector<uint64_t> mfns;
    for (const PageEntry& e : map.pages) mfns.push_back(e.gmfn);
    std::sort(mfns.begin(), mfns.end());
    EXPECT_EQ(std::adjacent_find(mfns.begin(), mfns.end()), mfns.end());
}

TEST(Hostile, ImplausibleEntriesAreHoles) {
    for (unsigned width : {8u, 4u}) {
        FakeHypervisor hv;
        PvGuestSpec spec = small_guest(P2mLayout::tree, width);
        // Linux's FOREIGN_FRAME_BIT / IDENTITY_FRAME_BIT, zero, garbage.
        const uint64_t foreign = width == 8 ? (uint64_t{1} << 63) | 0x100010 : 0x80100010;
        const uint64_t identity = width == 8 ? (uint64_t{1} << 62) | 0x100011 : 0x40100011;
        spec.p2m_overrides = {{16, foreign}, {17, identity}, {18, 0}};
        if (width == 8) spec.p2m_overrides.push_back({19, 0x00f0123456789abc});
        build_pv_guest(hv, spec);
        P2mMap map = discover_checked(hv, *hv.domain_info(1));
        for (uint64_t pfn : {16, 17, 18}) EXPECT_FALSE(has_pfn(map, pfn)) << width << " " << pfn;
        std::string w = warning_with(map, "not machine frames");
        EXPECT_NE(w.find(width == 8 ? "4 p2m entries" : "3 p2m entries"), std::string::npos) << w;
    }
}

TEST(Hostile, FrameListPointingAtItselfIsALoop) {
    FakeHypervisor hv;
    PvGuest g = build_pv_guest(hv, small_guest(P2mLayout::tree));
    hv.write_word(g.frame_list_list, 0, 8, g.frame_list_list);
    std::string e = error_of(hv, 1);
    EXPECT_NE(e.find("loops"), std::string::npos) << e;
}

TEST(Hostile, FrameListNamingAP2mPageAtAnotherLevelIsALoop) {
    FakeHypervisor hv;
    PvGuest g = build_pv_guest(hv, small_guest(P2mLayout::tree));
    hv.write_word(g.frame_list_mfns[0], 1, 8, g.frame_list_mfns[0]);
    std::string e = error_of(hv, 1);
    EXPECT_NE(e.find("loops"), std::string::npos) << e;
}

TEST(Hostile, PageTablePointingUpwardsIsALoop) {
    FakeHypervisor hv;
    PvGuest g = build_pv_guest(hv, small_guest(P2mLayout::linear));
    // Every L3 entry in use now names the L4 table.
    const uint64_t va = g.p2m_vaddr & 0x0000ffffffffffff;
    const uint64_t l3 = g.tables.at(3).at(0);
    hv.write_u64(l3, ((va >> 30) & 511) * 8, (g.top_table_mfn << 12) | 0x67);
    std::string e = error_of(hv, 1);
    EXPECT_NE(e.find("loops"), std::string::npos) << e;
}

TEST(Hostile, GarbagePageTableEntriesAreHoles) {
    FakeHypervisor hv;
    PvGuest g = build_pv_guest(hv, small_guest(P2mLayout::linear));
    const uint64_t va = g.p2m_vaddr & 0x0000ffffffffffff;
    const uint64_t l1 = g.tables.at(1).at(0);
    // p2m page 0 -> machine frame 0 (Xen's); p2m page 1 -> another domain's frame.
    hv.write_u64(l1, ((va >> 12) & 511) * 8, 0x67);
    hv.write_u64(l1, (((va >> 12) + 1) & 511) * 8, (kOtherDomainMfn << 12) | 0x67);
    // p2m page 2 not present at all.
    hv.write_u64(l1, (((va >> 12) + 2) & 511) * 8, 0);

    P2mMap map = discover_checked(hv, *hv.domain_info(1));
    EXPECT_EQ(map.pages.size(), 8192u - 3 * 512);
    EXPECT_FALSE(has_pfn(map, 0));
    EXPECT_FALSE(has_pfn(map, 1023));
    EXPECT_FALSE(has_pfn(map, 1535));
    EXPECT_TRUE(has_pfn(map, 1536));
    EXPECT_NE(warning_with(map, "structure entries").find("1 p2m"), std::string::npos);
    EXPECT_NE(warning_with(map, "p2m pages could not be mapped").find("1 p2m"), std::string::npos);
}

TEST(Hostile, BrokenLinearFallsBackToTheTree) {
    FakeHypervisor hv;
    PvGuest g = build_pv_guest(hv, small_guest(P2mLayout::both));
    set_arch_field(hv, g, 8, 4, 0x0000900000000000);  // p2m_vaddr not canonical
    P2mMap map = discover_checked(hv, *hv.domain_info(1));
    EXPECT_EQ(map.kind, format::P2mKind::tree);
    EXPECT_EQ(map.pages.size(), 8192u);
    EXPECT_NE(warning_with(map, "linear p2m cannot be walked"), "");
}

TEST(Hostile, BadLinearWithoutTreeIsAnError) {
    FakeHypervisor hv;
    PvGuest g = build_pv_guest(hv, small_guest(P2mLayout::linear));
    set_arch_field(hv, g, 8, 4, 0xffff800000001000);  // Xen's own range
    EXPECT_NE(error_of(hv, 1).find("address space"), std::string::npos);
    set_arch_field(hv, g, 8, 4, 0xffffc90000000123);  // unaligned
    EXPECT_NE(error_of(hv, 1).find("aligned"), std::string::npos);
}

TEST(Hostile, NoPublishedP2mIsAnError) {
    FakeHypervisor hv;
    PvGuest g = build_pv_guest(hv, small_guest(P2mLayout::tree));
    set_arch_field(hv, g, 8, 1, 0);
    EXPECT_NE(error_of(hv, 1).find("published no p2m"), std::string::npos);
}

TEST(Hostile, MaxPfn2To40FinishesInBoundedWork) {
    for (P2mLayout layout : {P2mLayout::tree, P2mLayout::linear}) {
        FakeHypervisor hv;
        PvGuest g = build_pv_guest(hv, small_guest(layout));
        // The hypervisor derives the maximum gpfn from max_pfn for PV guests.
        set_arch_field(hv, g, 8, 0, uint64_t{1} << 40);
        hv.domains.at(1).max_gpfn = (uint64_t{1} << 40) - 1;

        P2mMap map = discover_checked(hv, *hv.domain_info(1));
        EXPECT_EQ(map.pages.size(), 8192u);
        EXPECT_LE(map.p2m_size, p2m_size_limit(*hv.domain_info(1)));
        EXPECT_NE(warning_with(map, "implausible"), "");
        // Work is proportional to the limit, not to 2^40 pfns.
        EXPECT_LT(hv.mapped_frames, 100000u);
    }
}

TEST(Hostile, SharedInfoThatDoesNotMapIsAnError) {
    FakeHypervisor hv;
    build_pv_guest(hv, small_guest(P2mLayout::tree));
    hv.domains.at(1).info.shared_info_frame = kOtherDomainMfn;
    EXPECT_NE(error_of(hv, 1).find("shared_info"), std::string::npos);
}

// The guest's 8192 pages, then a frame list naming one leaf page again and
// again up to pfn 2^20: the leaf holds 512 distinct plausible frames that do
// not follow each other, so that every entry would be a stretch of its own.
// 1 Mi entries for a domain of 8192 frames: the p2m lies.
PvGuest guest_with_one_leaf_repeated(FakeHypervisor& hv) {
    PvGuest g = build_pv_guest(hv, small_guest(P2mLayout::tree));
    constexpr uint64_t kPfns = uint64_t{1} << 20, kFpp = 512;
    constexpr uint64_t kLeaf = 0x3000000, kLists = kLeaf + 1;
    hv.own(1, kLeaf, 1 + kPfns / kFpp / kFpp);
    uint64_t state = 7;
    for (uint64_t k = 0; k < kFpp; ++k) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        hv.write_word(kLeaf, k, 8, 1 + (state >> 25));  // below 2^40, never 0
    }
    for (uint64_t j = g.p2m_page_mfns.size(); j < kPfns / kFpp; ++j) {
        const uint64_t list = j < kFpp ? g.frame_list_mfns[0] : kLists + j / kFpp - 1;
        hv.write_word(g.frame_list_list, j / kFpp, 8, list);
        hv.write_word(list, j % kFpp, 8, kLeaf);
    }
    set_arch_field(hv, g, 8, 0, kPfns);
    hv.domains.at(1).max_gpfn = kPfns - 1;
    return g;
}

// The entries beyond the frames the domain can own are holes: discovery
// keeps the guest's own 8192 pages (the first plausible entries) and holds
// no more than 8192 entries, however often the leaf repeats.
TEST(Hostile, OneLeafRepeatedKeepsNoMoreEntriesThanTheDomainsFrames) {
    FakeHypervisor hv;
    const PvGuest g = guest_with_one_leaf_repeated(hv);
    const DomainInfo info = *hv.domain_info(1);
    ASSERT_EQ(info.tot_pages, 8192u);
    for (bool verify : {true, false}) {
        P2mMap map = discover_checked(hv, info, P2mOptions{.verify_frames = verify});
        EXPECT_TRUE(same_pages(map.pages, g.expected)) << map.pages.size() << " pages";
        const std::string w = warning_with(map, "the domain can own");
        EXPECT_NE(w.find(std::to_string((uint64_t{1} << 20) - 8192) + " p2m entries name frames beyond the 8192 "),
                  std::string::npos)
            << w;
        EXPECT_NE(w.find("first: pfn 0x2000 = "), std::string::npos) << w;
        EXPECT_EQ(warning_with(map, "already names"), "") << "the leaf's frames were never taken";
    }

    // The dumper's walk (unverified, kept as stretches): one stretch, not one
    // per entry of the repeated leaf.
    P2mWindows windows(hv, info, P2mOptions{.verify_frames = false});
    FrameDuplicates duplicates;
    PageExtents present;
    std::vector<PageEntry> window;
    uint64_t entries = 0;
    while (windows.next(window)) {
        entries += window.size();
        duplicates.add(window);
        present.append(window);
    }
    duplicates.finish();
    EXPECT_EQ(entries, 8192u);
    EXPECT_EQ(duplicates.stretches(), 1u);
    EXPECT_EQ(present.extents().size(), 1u);
    EXPECT_EQ(duplicates.dropped_pages(), 0u);
}

// Linux marks grant-mapped pfns with FOREIGN_FRAME_BIT and the pfns of
// non-RAM ranges (PCI holes, passed-through devices) with IDENTITY_FRAME_BIT:
// no frames of the domain's, so many of them never count against its frames.
TEST(Hostile, ForeignAndIdentityEntriesDoNotCountAgainstTheDomainsFrames) {
    for (unsigned width : {8u, 4u}) {
        FakeHypervisor hv;
        PvGuestSpec spec = small_guest(P2mLayout::both, width);
        spec.p2m_size = 0x10000;
        const uint64_t foreign = width == 8 ? uint64_t{1} << 63 : uint64_t{1} << 31;
        const uint64_t identity = width == 8 ? uint64_t{1} << 62 : uint64_t{1} << 30;
        for (uint64_t pfn = 0x2000; pfn < 0x10000; ++pfn)
            spec.p2m_overrides.push_back({pfn, pfn < 0x8000 ? foreign | (0x200000 + pfn) : identity | pfn});
        const PvGuest g = build_pv_guest(hv, spec);
        ASSERT_EQ(hv.domain_info(1)->tot_pages, 8192u);
        P2mMap map = discover_checked(hv, *hv.domain_info(1), P2mOptions{.verify_frames = false});
        EXPECT_TRUE(same_pages(map.pages, g.expected)) << width;
        EXPECT_EQ(warning_with(map, "the domain can own"), "") << width;
    }
}

// The out-of-core duplicate check against the obvious in-memory one, on
// stretches that overlap in every way (inside, across, three deep, equal
// frames at different pfns) and single pages: each frame keeps its lowest pfn.
TEST(Hostile, FrameDuplicatesDropsExactlyTheHigherPfns) {
    for (uint64_t seed = 1; seed <= 40; ++seed) {
        std::vector<PageEntry> pages;
        uint64_t state = seed, pfn = 0;
        auto next = [&state] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL; };
        while (pages.size() < 3000) {
            pfn += 1 + (next() >> 60);                      // small holes
            const uint64_t frame = 0x1000 + (next() >> 54);  // frames in a narrow window: many repeats
            const uint64_t len = 1 + (next() >> 58);
            for (uint64_t i = 0; i < len; ++i) pages.push_back({pfn + i, frame + i});
            pfn += len;
        }
        FrameDuplicates dup;
        for (size_t at = 0; at < pages.size(); at += 700)
            dup.add(std::span(pages).subspan(at, std::min<size_t>(700, pages.size() - at)));
        dup.finish();
        std::map<uint64_t, uint64_t> owner;  // frame -> lowest pfn
        for (const PageEntry& e : pages) owner.try_emplace(e.gmfn, e.pfn);
        uint64_t dropped = 0;
        for (const PageEntry& e : pages) {
            const bool drop = owner.at(e.gmfn) != e.pfn;
            dropped += drop;
            ASSERT_EQ(dup.contains(e.pfn), drop) << "seed " << seed << " pfn " << e.pfn << " frame " << e.gmfn;
        }
        EXPECT_EQ(dup.dropped_pages(), dropped);
        EXPECT_EQ(dup.warning().empty(), dropped == 0);
    }
}

TEST(Hostile, FrameDuplicatesKeepsStretchesNotPages) {
    std::vector<PageEntry> pages;
    for (uint64_t i = 0; i < 100000; ++i) pages.push_back({i, 0x100000 + i});
    FrameDuplicates dup;
    dup.add(pages);
    dup.finish();
    EXPECT_EQ(dup.stretches(), 1u);
    EXPECT_EQ(dup.dropped_pages(), 0u);
}

}  // namespace
}  // namespace xendump::test
