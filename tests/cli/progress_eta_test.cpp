// The progress bar's ETA: shown only once the rate is known, from the pages
// that flowed, never from a first sample or from the time before the pass.
#include <gtest/gtest.h>

#include "progress_eta.hpp"

namespace xendump::cli {
namespace {

constexpr uint64_t kTotal = 1000000;

TEST(ProgressEta, NoEstimateFromTheFirstSample) {
    EtaEstimate eta;
    EXPECT_FALSE(eta.update(0, kTotal, 0.0));
    EXPECT_FALSE(eta.update(100, kTotal, 0.05));
    EXPECT_EQ(EtaEstimate::format(eta.update(100, kTotal, 0.05)), "--");
}

TEST(ProgressEta, NoEstimateBeforeASecondOrOnePercent) {
    EtaEstimate eta;
    EXPECT_FALSE(eta.update(1000, kTotal, 0.1));
    // 0.5 % after 0.6 s: neither long nor far enough.
    EXPECT_FALSE(eta.update(6000, kTotal, 0.6));
    // 1 % covered, but only 0.1 s after the first sample: still unknown.
    EtaEstimate quick;
    EXPECT_FALSE(quick.update(1000, kTotal, 0.1));
    EXPECT_FALSE(quick.update(12000, kTotal, 0.2));
}

TEST(ProgressEta, EstimateOnceOnePercentIsCovered) {
    EtaEstimate eta;
    EXPECT_FALSE(eta.update(1000, kTotal, 0.1));
    auto left = eta.update(21000, kTotal, 0.5);  // 20000 units in 0.4 s: 50000/s
    ASSERT_TRUE(left);
    EXPECT_NEAR(*left, (kTotal - 21000) / 50000.0, 1e-6);
}

TEST(ProgressEta, EstimateAfterOneSecond) {
    EtaEstimate eta;
    EXPECT_FALSE(eta.update(10, kTotal, 0.0));
    auto left = eta.update(1010, kTotal, 1.0);  // 1000 units a second
    ASSERT_TRUE(left);
    EXPECT_NEAR(*left, (kTotal - 1010) / 1000.0, 1e-6);
}

// The reported case: a pass whose first pages come late (pausing the guest,
// walking its p2m) and then flow fast. The time before the first page must not
// make a 2-second dump look like a minute's work.
TEST(ProgressEta, StartUpTimeDoesNotCount) {
    EtaEstimate eta;
    EXPECT_FALSE(eta.update(0, kTotal, 0.0));
    EXPECT_FALSE(eta.update(0, kTotal, 1.5));      // start-up: nothing done yet
    EXPECT_FALSE(eta.update(5000, kTotal, 1.6));   // the first pages
    auto left = eta.update(505000, kTotal, 2.6);  // half the work in one second
    ASSERT_TRUE(left);
    EXPECT_NEAR(*left, 0.99, 0.01);
    EXPECT_EQ(EtaEstimate::format(left), "0:01");
}

TEST(ProgressEta, Format) {
    EXPECT_EQ(EtaEstimate::format(std::nullopt), "--");
    EXPECT_EQ(EtaEstimate::format(0.0), "0:00");
    EXPECT_EQ(EtaEstimate::format(78.0), "1:18");
    EXPECT_EQ(EtaEstimate::format(3725.0), "1:02:05");
    EXPECT_EQ(EtaEstimate::format(-1.0), "--");
}

}  // namespace
}  // namespace xendump::cli
