// The times of xen-dumpctl -S/--since and -U/--until (ctl/time_spec.hpp),
// with a fixed clock.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

#include "time_spec.hpp"
#include "xendump/error.hpp"

namespace xendump::ctl {
namespace {

// Times without a zone are local (the TZ rules): the tests below that give
// none run with TZ=UTC0; LocalTime sets a zone with daylight saving.
struct InUtc : ::testing::Environment {
    void SetUp() override {
        ::setenv("TZ", "UTC0", 1);
        ::tzset();
    }
};
const auto* const kInUtc = ::testing::AddGlobalTestEnvironment(new InUtc);

// 2026-03-15 13:45:30 UTC.
constexpr int64_t kNow = 1773582330;
constexpr int64_t kMidnight = 1773532800;  // 2026-03-15 00:00:00 UTC

TEST(TimeSpec, TheFixedClockIsTheDateItClaims) {
    EXPECT_EQ(parse_time_spec("2026-03-15 13:45:30", 0), kNow);
    EXPECT_EQ(parse_time_spec("2026-03-15", 0), kMidnight);
}

TEST(TimeSpec, AbsoluteForms) {
    EXPECT_EQ(parse_time_spec("1970-01-01", kNow), 0);
    EXPECT_EQ(parse_time_spec("1970-01-02 00:00", kNow), 86400);
    EXPECT_EQ(parse_time_spec("2026-03-15 13:45", kNow), kNow - 30);
    EXPECT_EQ(parse_time_spec("2026-03-15T13:45:30Z", kNow), kNow);
    EXPECT_EQ(parse_time_spec("2026-03-15 13:45:30 UTC", kNow), kNow);
    EXPECT_EQ(parse_time_spec("2026-03-15T13:45:30+00:00", kNow), kNow);
    EXPECT_EQ(parse_time_spec("  2026-03-15  ", kNow), kMidnight);
    EXPECT_EQ(parse_time_spec("2024-02-29", kNow), 1709164800);  // a leap day
    EXPECT_EQ(parse_time_spec("2000-03-01", kNow), 951868800);
    EXPECT_EQ(parse_time_spec("@1000", kNow), 1000);
}

TEST(TimeSpec, WordsAreMidnightsOfTheClocksDay) {
    EXPECT_EQ(parse_time_spec("now", kNow), kNow);
    EXPECT_EQ(parse_time_spec("today", kNow), kMidnight);
    EXPECT_EQ(parse_time_spec("yesterday", kNow), kMidnight - 86400);
    EXPECT_EQ(parse_time_spec("tomorrow", kNow), kMidnight + 86400);
    // At midnight exactly, today is that midnight.
    EXPECT_EQ(parse_time_spec("today", kMidnight), kMidnight);
}

TEST(TimeSpec, RelativeForms) {
    EXPECT_EQ(parse_time_spec("-2h", kNow), kNow - 7200);
    EXPECT_EQ(parse_time_spec("-30min", kNow), kNow - 1800);
    EXPECT_EQ(parse_time_spec("-1d", kNow), kNow - 86400);
    EXPECT_EQ(parse_time_spec("+1w", kNow), kNow + 7 * 86400);
    EXPECT_EQ(parse_time_spec("-90s", kNow), kNow - 90);
    EXPECT_EQ(parse_time_spec("-5m", kNow), kNow - 300);  // m is minutes, as in systemd.time(7)
    EXPECT_EQ(parse_time_spec("-1d 6h", kNow), kNow - 86400 - 6 * 3600);
    EXPECT_EQ(parse_time_spec("-1h30min", kNow), kNow - 5400);
    EXPECT_EQ(parse_time_spec("2h ago", kNow), kNow - 7200);
    EXPECT_EQ(parse_time_spec("3 days ago", kNow), kNow - 3 * 86400);
}

TEST(TimeSpec, AnythingElseIsAnErrorNamingTheText) {
    for (const char* bad : {"", "soon", "-2x", "-", "2h", "2026-02-30", "2026-13-01", "2026-03-15 24:00",
                            "2026-03-15 12:60", "2026-03-15 12", "2026-3-15", "2026-03-15 12:00 CET", "@",
                            "@12x", "ago", "-h", "--2h"}) {
        try {
            parse_time_spec(bad, kNow);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace xendump::ctl

namespace xendump::ctl {
namespace {

// Central European time: CET (UTC+1), CEST (UTC+2) from 2026-03-29 02:00.
struct LocalTime : ::testing::Test {
    void SetUp() override {
        ::setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);
        ::tzset();
    }
    void TearDown() override {
        ::setenv("TZ", "UTC0", 1);
        ::tzset();
    }
};

TEST_F(LocalTime, TimesWithoutAZoneAreLocalUnlessUtcIsAsked) {
    EXPECT_EQ(parse_time_spec("2026-03-15 13:45:30", kNow), 1773578730);  // 12:45:30 UTC
    EXPECT_EQ(parse_time_spec("2026-03-15 13:45:30", kNow, Zone::utc), kNow);
    EXPECT_EQ(parse_time_spec("2026-03-15 13:45:30 UTC", kNow), kNow);  // a zone given wins
    EXPECT_EQ(parse_time_spec("2026-03-15T13:45:30Z", kNow), kNow);
    EXPECT_EQ(parse_time_spec("2026-03-29", kNow), 1774738800);          // CET midnight
    EXPECT_EQ(parse_time_spec("2026-03-30", kNow), 1774821600);          // CEST midnight
}

TEST_F(LocalTime, DayWordsAreLocalMidnightsAcrossADaylightSavingChange) {
    const int64_t noon = 1774778400;  // 2026-03-29 12:00 CEST, the day of 23 hours
    EXPECT_EQ(parse_time_spec("today", noon), 1774738800);
    EXPECT_EQ(parse_time_spec("tomorrow", noon), 1774821600);
    EXPECT_EQ(parse_time_spec("tomorrow", noon) - parse_time_spec("today", noon), 23 * 3600);
    EXPECT_EQ(parse_time_spec("yesterday", noon), 1774738800 - 86400);
    EXPECT_EQ(parse_time_spec("today", noon, Zone::utc), 1774742400);  // 2026-03-29 00:00 UTC
}

}  // namespace
}  // namespace xendump::ctl
