// PageExtents (libdump/src/p2m/page_extents.*), the dumper's list of present
// pages: entries read back as appended, pfn lookups by the one run search the
// reader uses too (util/runs.hpp), and the list without ranges of pfns.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "p2m/page_extents.hpp"
#include "xendump/error.hpp"

namespace xendump::test {
namespace {

// PV-like: pfns with gaps, gmfns that jump inside a stretch of pfns.
std::vector<PageEntry> entries() {
    std::vector<PageEntry> v;
    for (uint64_t p = 0; p < 10; ++p) v.push_back({p, 0x1000 + p});
    for (uint64_t p = 10; p < 14; ++p) v.push_back({p, 0x9000 + p});  // same pfn run, new gmfn stretch
    for (uint64_t p = 20; p < 21; ++p) v.push_back({p, 0x20});
    for (uint64_t p = 1000; p < 1100; ++p) v.push_back({p, p});
    return v;
}

TEST(PageExtents, IndexOfPfnFindsEveryEntryAndNothingElse) {
    const auto all = entries();
    PageExtents x;
    x.append(all);
    EXPECT_EQ(x.size(), all.size());
    EXPECT_EQ(x.extents().size(), 4u);
    std::map<uint64_t, uint64_t> index;
    for (uint64_t i = 0; i < all.size(); ++i) index[all[i].pfn] = i;
    for (uint64_t pfn = 0; pfn < 1200; ++pfn) {
        const auto got = x.index_of_pfn(pfn);
        const auto want = index.find(pfn);
        if (want == index.end())
            EXPECT_FALSE(got.has_value()) << "pfn " << pfn;
        else
            EXPECT_EQ(got, std::optional<uint64_t>(want->second)) << "pfn " << pfn;
    }
    EXPECT_FALSE(x.index_of_pfn(~uint64_t{0}).has_value());
    EXPECT_FALSE(PageExtents().index_of_pfn(0).has_value());
    // Entries read back as appended, from any index.
    std::vector<PageEntry> back(all.size() - 7);
    x.read(7, back);
    for (size_t i = 0; i < back.size(); ++i) {
        EXPECT_EQ(back[i].pfn, all[7 + i].pfn) << i;
        EXPECT_EQ(back[i].gmfn, all[7 + i].gmfn) << i;
    }
    std::vector<PageEntry> past(2);
    EXPECT_THROW(x.read(all.size() - 1, past), Error);
}

TEST(PageExtents, WithoutRangesDropsTheirPfnsAndRenumbers) {
    PageExtents x;
    x.append(entries());
    const PageExtents::PfnRange drop[] = {{5, 12}, {1000, 1050}};
    const PageExtents y = x.without(drop);
    EXPECT_EQ(y.size(), x.size() - 7 - 50);
    EXPECT_EQ(y.index_of_pfn(4), std::optional<uint64_t>(4));
    EXPECT_FALSE(y.index_of_pfn(5).has_value());
    EXPECT_FALSE(y.index_of_pfn(11).has_value());
    EXPECT_EQ(y.index_of_pfn(12), std::optional<uint64_t>(5));
    EXPECT_EQ(y.index_of_pfn(20), std::optional<uint64_t>(7));
    EXPECT_FALSE(y.index_of_pfn(1049).has_value());
    EXPECT_EQ(y.index_of_pfn(1050), std::optional<uint64_t>(8));
    PageEntry e{};
    y.read(5, std::span(&e, 1));
    EXPECT_EQ(e.pfn, 12u);
    EXPECT_EQ(e.gmfn, 0x9000u + 12);
}

TEST(PageExtents, AppendRefusesPfnsThatDoNotRise) {
    PageExtents x;
    x.append(entries());
    const PageEntry again[] = {{1099, 1099}};
    EXPECT_THROW(x.append(again), Error);
}

}  // namespace
}  // namespace xendump::test
