// legacy::MfnSlots, the MFN -> index slot table of page-list recovery: every
// MFN found again, a second insert of an MFN reports the first slot and
// changes nothing, MFNs never inserted (below, inside and above the range,
// ~0) are absent, and it grows past its reservation.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "legacy/pfn_map.hpp"
#include "legacy/xc_core.hpp"

namespace xendump::legacy {
namespace {

TEST(MfnSlots, FindsEveryMfnAndNothingElse) {
    std::mt19937_64 rng(3);
    std::vector<uint64_t> mfns;
    std::set<uint64_t> seen;
    while (mfns.size() < 100000) {
        const uint64_t m = 1000 + rng() % 10000000;
        if (seen.insert(m).second) mfns.push_back(m);
    }
    MfnSlots t;
    t.reserve(mfns.size() / 10);  // smaller than needed: must grow
    for (size_t i = 0; i < mfns.size(); ++i) ASSERT_FALSE(t.insert(mfns[i], i).has_value()) << i;
    EXPECT_EQ(t.size(), mfns.size());
    for (size_t i = 0; i < mfns.size(); ++i) ASSERT_EQ(t.slot_of(mfns[i]), i) << i;
    EXPECT_FALSE(t.contains(0));
    EXPECT_FALSE(t.contains(999));
    EXPECT_FALSE(t.contains(20000000));
    EXPECT_FALSE(t.contains(kInvalidEntry));
    size_t absent_checked = 0;
    for (uint64_t m = 1000; m < 1000 + 10000000 && absent_checked < 1000; m += 7)
        if (!seen.count(m)) {
            ASSERT_FALSE(t.contains(m)) << m;
            ++absent_checked;
        }
}

TEST(MfnSlots, ASecondInsertReportsTheFirstSlot) {
    MfnSlots t;
    EXPECT_FALSE(t.insert(42, 7).has_value());
    EXPECT_EQ(t.insert(42, 9), 7u);
    EXPECT_EQ(t.slot_of(42), 7u);
    EXPECT_EQ(t.size(), 1u);
    EXPECT_FALSE(t.insert(kInvalidEntry, 3).has_value());  // ~0 is no frame: not added
    EXPECT_FALSE(t.contains(kInvalidEntry));
    EXPECT_EQ(t.size(), 1u);
}

TEST(MfnSlots, BuildReportsTheFirstDuplicateAndSkipsEmptyEntries) {
    MfnSlots t;
    const std::vector<uint64_t> index = {5, kInvalidEntry, 6, 5, 6};
    auto dup = build_mfn_slots(index, t);
    ASSERT_TRUE(dup.has_value());
    EXPECT_EQ(dup->mfn, 5u);
    EXPECT_EQ(dup->first_slot, 0u);
    EXPECT_EQ(dup->second_slot, 3u);
    EXPECT_FALSE(build_mfn_slots({1, kInvalidEntry, 3}, t).has_value());
    EXPECT_EQ(t.size(), 2u);  // cleared first
    EXPECT_EQ(t.slot_of(3), 2u);
    EXPECT_FALSE(t.contains(5));
}

}  // namespace
}  // namespace xendump::legacy
