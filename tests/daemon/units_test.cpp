// Sizes, percentages, durations and booleans of the configuration.
#include <gtest/gtest.h>

#include "units.hpp"
#include "xendump/error.hpp"

using namespace xendump::daemon;

TEST(Units, Bytes) {
    EXPECT_EQ(parse_bytes("0"), 0u);
    EXPECT_EQ(parse_bytes("1234"), 1234u);
    EXPECT_EQ(parse_bytes("4K"), 4096u);
    EXPECT_EQ(parse_bytes("4k"), 4096u);
    EXPECT_EQ(parse_bytes("3M"), 3u << 20);
    EXPECT_EQ(parse_bytes("2G"), 2ull << 30);
    EXPECT_EQ(parse_bytes("2GiB"), 2ull << 30);
    EXPECT_EQ(parse_bytes("2GB"), 2ull << 30);
    EXPECT_EQ(parse_bytes("5T"), 5ull << 40);
    EXPECT_EQ(parse_bytes("16777215T"), 16777215ull << 40);
    for (const char* bad : {"", "G", "-1", "1.5G", "12X", "16777216T", "99999999999999999999", " 5"})
        EXPECT_THROW(parse_bytes(bad), xendump::Error) << bad;
}

TEST(Units, SizeLimits) {
    auto pct = parse_size_limit("15%");
    EXPECT_TRUE(pct.relative);
    EXPECT_EQ(pct.resolve(1000), 150u);
    EXPECT_EQ(pct.resolve(uint64_t{1} << 60), (uint64_t{1} << 60) / 100 * 15);
    auto abs = parse_size_limit("1M");
    EXPECT_FALSE(abs.relative);
    EXPECT_EQ(abs.resolve(10), 1u << 20);
    for (const char* bad : {"0%", "101%", "%", "5K%", "x%"}) EXPECT_THROW(parse_size_limit(bad), xendump::Error) << bad;
}

TEST(Units, Durations) {
    EXPECT_EQ(parse_duration("0").count(), 0);
    EXPECT_EQ(parse_duration("90").count(), 90);
    EXPECT_EQ(parse_duration("30s").count(), 30);
    EXPECT_EQ(parse_duration("5min").count(), 300);
    EXPECT_EQ(parse_duration("5m").count(), 300);
    EXPECT_EQ(parse_duration("2h").count(), 7200);
    EXPECT_EQ(parse_duration("7d").count(), 7 * 86400);
    EXPECT_EQ(parse_duration("1w").count(), 7 * 86400);
    for (const char* bad : {"", "h", "5 min", "5y", "-3s", "99999999999999999999w"})
        EXPECT_THROW(parse_duration(bad), xendump::Error) << bad;
    EXPECT_EQ(format_duration(std::chrono::seconds(300)), "5min");
    EXPECT_EQ(format_duration(std::chrono::seconds(45)), "45s");
}

TEST(Units, Booleans) {
    for (const char* t : {"yes", "true", "on", "1", "YES"}) EXPECT_TRUE(parse_bool(t)) << t;
    for (const char* f : {"no", "false", "off", "0"}) EXPECT_FALSE(parse_bool(f)) << f;
    EXPECT_THROW(parse_bool("maybe"), xendump::Error);
}
