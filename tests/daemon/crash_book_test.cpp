// Exactly-once bookkeeping: a crash is dumped once, also across restarts
// (a new CrashBook on the same state file), and a new crash instance is
// dumped again.
#include <gtest/gtest.h>

#include <fstream>

#include "crash_book.hpp"
#include "test_support.hpp"

using namespace xendump::daemon;
using xendump::DomainInfo;
using xendump::ShutdownReason;
using xendump::test::TempDir;

namespace {

DomainInfo domain(uint32_t domid, uint8_t uuid_byte, bool crashed) {
    DomainInfo d;
    d.domid = domid;
    d.handle.fill(uuid_byte);
    d.shutdown = crashed;
    d.shutdown_reason = ShutdownReason::crash;
    return d;
}

}  // namespace

TEST(CrashBook, EachCrashOnce) {
    TempDir dir;
    CrashBook book(dir / "state.json");
    auto fresh = book.observe({domain(1, 1, false), domain(2, 2, true), domain(3, 3, true)});
    ASSERT_EQ(fresh.size(), 2u);
    EXPECT_EQ(fresh[0].domid, 2u);
    EXPECT_EQ(fresh[1].domid, 3u);
    // In progress: not handed out again.
    EXPECT_TRUE(book.observe({domain(2, 2, true), domain(3, 3, true)}).empty());
    book.mark_handled(fresh[0]);
    book.mark_handled(fresh[1]);
    EXPECT_TRUE(book.observe({domain(2, 2, true), domain(3, 3, true)}).empty());
}

TEST(CrashBook, RestartRemembersHandledCrashes) {
    TempDir dir;
    {
        CrashBook book(dir / "state.json");
        auto fresh = book.observe({domain(5, 9, true)});
        ASSERT_EQ(fresh.size(), 1u);
        book.mark_handled(fresh[0]);
    }
    CrashBook again(dir / "state.json");
    EXPECT_TRUE(again.observe({domain(5, 9, true)}).empty());
}

TEST(CrashBook, AbandonedDumpIsRetriedAfterRestart) {
    TempDir dir;
    {
        CrashBook book(dir / "state.json");
        auto fresh = book.observe({domain(5, 9, true)});
        ASSERT_EQ(fresh.size(), 1u);
        book.mark_abandoned(fresh[0]);
    }
    CrashBook again(dir / "state.json");
    EXPECT_EQ(again.observe({domain(5, 9, true)}).size(), 1u);
}

TEST(CrashBook, NewCrashInstanceIsDumpedAgain) {
    TempDir dir;
    {
        CrashBook book(dir / "state.json");
        auto fresh = book.observe({domain(5, 9, true)});
        book.mark_handled(fresh.at(0));
    }
    {
        // Restarted while the service was down: seen running...
        CrashBook book(dir / "state.json");
        EXPECT_TRUE(book.observe({domain(5, 9, false)}).empty());
    }
    // ... then crashed again after yet another restart of the service.
    CrashBook book(dir / "state.json");
    EXPECT_EQ(book.observe({domain(5, 9, true)}).size(), 1u);
    // Same domid, another guest (uuid): another instance as well.
    CrashBook other(dir / "other.json");
    auto a = other.observe({domain(5, 9, true)});
    other.mark_handled(a.at(0));
    EXPECT_EQ(other.observe({domain(5, 4, true)}).size(), 1u);
}

TEST(CrashBook, MinIntervalCountsSkips) {
    TempDir dir;
    CrashBook book(dir / "state.json");
    EXPECT_FALSE(book.within_min_interval("g", 1000, 60));
    book.record_dump_time("g", 1000);
    EXPECT_TRUE(book.within_min_interval("g", 1010, 60));
    EXPECT_TRUE(book.within_min_interval("g", 1059, 60));
    EXPECT_FALSE(book.within_min_interval("g", 1060, 60));
    EXPECT_FALSE(book.within_min_interval("other", 1010, 60));
    EXPECT_FALSE(book.within_min_interval("g", 1010, 0));
    EXPECT_EQ(book.skipped("g"), 2u);
    CrashBook again(dir / "state.json");
    EXPECT_TRUE(again.within_min_interval("g", 1020, 60));
    EXPECT_EQ(again.skipped("g"), 3u);
}

TEST(CrashBook, DamagedStateFileIsSetAside) {
    TempDir dir;
    std::ofstream(dir / "state.json") << "{\"handled\": [{\"domid\": \"x\"}]}";
    CrashBook book(dir / "state.json");
    EXPECT_FALSE(book.load_warning().empty());
    EXPECT_TRUE(std::filesystem::exists(dir / "state.json.bad"));
    EXPECT_EQ(book.observe({domain(5, 9, true)}).size(), 1u);
}
