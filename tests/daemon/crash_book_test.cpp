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
namespace fs = std::filesystem;

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

namespace {

// A book on `state` saw domain 5's crash and `outcome` recorded its dump;
// then the service restarts: what a new book on the same file hands out.
std::vector<CrashKey> after_restart(const fs::path& state, void (CrashBook::*outcome)(const CrashKey&)) {
    {
        CrashBook book(state);
        auto fresh = book.observe({domain(5, 9, true)});
        EXPECT_EQ(fresh.size(), 1u);
        if (fresh.size() == 1) (book.*outcome)(fresh[0]);
    }
    CrashBook again(state);
    return again.observe({domain(5, 9, true)});
}

}  // namespace

TEST(CrashBook, RestartRemembersHandledCrashes) {
    TempDir dir;
    EXPECT_TRUE(after_restart(dir / "state.json", &CrashBook::mark_handled).empty());
}

TEST(CrashBook, AbandonedDumpIsRetriedAfterRestart) {
    TempDir dir;
    EXPECT_EQ(after_restart(dir / "state.json", &CrashBook::mark_abandoned).size(), 1u);
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

// Issue 16.2: a state file that cannot be written (a full disk) must not
// throw out of the crash scan; the state lives on and is written later.
TEST(CrashBook, UnwritableStateFileIsReportedNotThrown) {
    TempDir dir;
    fs::path state = dir / "not-yet" / "state.json";
    CrashBook book(state);
    auto fresh = book.observe({domain(4, 4, true)});
    ASSERT_EQ(fresh.size(), 1u);
    EXPECT_NO_THROW(book.record_dump_time("g", 100));
    EXPECT_NO_THROW(book.mark_handled(fresh[0]));
    EXPECT_NE(book.save_error().find("state.json"), std::string::npos) << book.save_error();
    EXPECT_TRUE(book.handled(fresh[0]));
    fs::create_directories(state.parent_path());
    book.flush();
    EXPECT_EQ(book.save_error(), "");
    CrashBook again(state);
    EXPECT_TRUE(again.handled(fresh[0]));
}

// A dump that failed for want of room leaves the crash waiting, with its
// reason, until it is retried; a crash that ended meanwhile is forgotten.
TEST(CrashBook, CrashWaitingForRoomIsRetriedNotForgotten) {
    TempDir dir;
    CrashBook book(dir / "state.json");
    auto fresh = book.observe({domain(4, 4, true), domain(5, 5, true)});
    ASSERT_EQ(fresh.size(), 2u);
    book.mark_waiting(fresh[0], "not enough room", 50);
    book.mark_waiting(fresh[1], "No space left on device", 50);
    // Not fresh again, not handled, not due before its time.
    EXPECT_TRUE(book.observe({domain(4, 4, true), domain(5, 5, true)}).empty());
    EXPECT_FALSE(book.handled(fresh[0]));
    EXPECT_TRUE(book.due_retries(49).empty());
    ASSERT_EQ(book.due_retries(50).size(), 2u);
    EXPECT_EQ(book.retries().at(fresh[0]).error, "not enough room");
    book.take_retry(fresh[0]);
    EXPECT_EQ(book.due_retries(60), std::vector<CrashKey>{fresh[1]});
    book.mark_waiting(fresh[0], "not enough room", 70);
    EXPECT_EQ(book.retries().at(fresh[0]).attempts, 2u);
    book.take_retry(fresh[0]);
    book.mark_handled(fresh[0]);
    EXPECT_TRUE(book.handled(fresh[0]));
    EXPECT_EQ(book.retries().count(fresh[0]), 0u);
    // Domain 5 is destroyed while it waits: nothing left to retry.
    book.observe({domain(4, 4, true)});
    EXPECT_TRUE(book.retries().empty());
    EXPECT_TRUE(book.due_retries(1000).empty());
}
