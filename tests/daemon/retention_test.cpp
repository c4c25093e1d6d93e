// The storage policy, pure: which dumps go, oldest first, and whether a new
// dump of a given size may start.
#include <gtest/gtest.h>

#include "retention.hpp"

using namespace xendump::daemon;

namespace {

constexpr uint64_t MiB = 1 << 20;
const FilesystemSpace kBigDisk{1000 * 1024 * MiB, 900 * 1024 * MiB};

std::vector<StoredDump> five_dumps() {
    // ids in age order: a oldest ... e newest; two domains.
    return {
        {"c", "dom1", 300, 100 * MiB, false}, {"a", "dom1", 100, 100 * MiB, false},
        {"e", "dom2", 500, 100 * MiB, false}, {"b", "dom2", 200, 100 * MiB, false},
        {"d", "dom1", 400, 100 * MiB, false},
    };
}

using Ids = std::vector<std::string>;

}  // namespace

TEST(Retention, NoLimitsRemovesNothing) {
    auto d = decide_retention(five_dumps(), {}, kBigDisk, 1000);
    EXPECT_TRUE(d.remove.empty());
    EXPECT_TRUE(d.fits);
}

TEST(Retention, MaxUseRemovesOldestFirstAndKeepsNewest) {
    RetentionLimits l;
    l.max_use = SizeLimit{250 * MiB, 0, false};
    auto d = decide_retention(five_dumps(), l, kBigDisk, 1000);
    EXPECT_EQ(d.remove, (Ids{"a", "b", "c"}));
    EXPECT_TRUE(d.fits);
}

TEST(Retention, MaxUseAsPercentOfFilesystem) {
    RetentionLimits l;
    l.max_use = SizeLimit{0, 10, true};
    FilesystemSpace fs{2000 * MiB, 1500 * MiB};  // 10% = 200 MiB
    auto d = decide_retention(five_dumps(), l, fs, 1000);
    EXPECT_EQ(d.remove, (Ids{"a", "b", "c"}));
}

TEST(Retention, IncomingDumpMakesRoomFirst) {
    RetentionLimits l;
    l.max_use = SizeLimit{500 * MiB, 0, false};
    auto d = decide_retention(five_dumps(), l, kBigDisk, 1000, 150 * MiB);
    EXPECT_EQ(d.remove, (Ids{"a", "b"}));
    EXPECT_TRUE(d.fits);
}

TEST(Retention, DumpBiggerThanMaxUseIsRefusedWithoutSacrifices) {
    RetentionLimits l;
    l.max_use = SizeLimit{500 * MiB, 0, false};
    auto d = decide_retention(five_dumps(), l, kBigDisk, 1000, 600 * MiB);
    EXPECT_FALSE(d.fits);
    EXPECT_NE(d.why_not.find("MaxUse"), std::string::npos) << d.why_not;
    EXPECT_TRUE(d.remove.empty());
}

TEST(Retention, KeepFreeRemovesUntilEnoughIsFree) {
    RetentionLimits l;
    l.keep_free = SizeLimit{250 * MiB, 0, false};
    FilesystemSpace fs{1000 * MiB, 60 * MiB};
    auto d = decide_retention(five_dumps(), l, fs, 1000);
    EXPECT_EQ(d.remove, (Ids{"a", "b"}));  // 60 + 200 >= 250
    EXPECT_TRUE(d.fits);
}

TEST(Retention, NoFreeSpaceRefusesEvenWithoutLimits) {
    FilesystemSpace fs{1000 * MiB, 10 * MiB};
    auto d = decide_retention({}, {}, fs, 1000, 50 * MiB);
    EXPECT_FALSE(d.fits);
    EXPECT_NE(d.why_not.find("free"), std::string::npos);
}

TEST(Retention, FreeSpaceFromOldDumpsAdmitsTheNewOne) {
    FilesystemSpace fs{1000 * MiB, 10 * MiB};
    auto d = decide_retention(five_dumps(), {}, fs, 1000, 150 * MiB);
    EXPECT_TRUE(d.fits);
    EXPECT_EQ(d.remove, (Ids{"a", "b"}));
}

TEST(Retention, KeepPerDomainKeepsNewestOfEach) {
    RetentionLimits l;
    l.keep_per_domain = 1;
    auto d = decide_retention(five_dumps(), l, kBigDisk, 1000);
    EXPECT_EQ(d.remove, (Ids{"a", "b", "c"}));  // keeps d (dom1) and e (dom2)
}

TEST(Retention, MaxAge) {
    RetentionLimits l;
    l.max_age = std::chrono::seconds(250);
    auto d = decide_retention(five_dumps(), l, kBigDisk, 600);
    EXPECT_EQ(d.remove, (Ids{"a", "b", "c"}));  // ages 500, 400, 300
}

TEST(Retention, DumpInUseIsNeverRemoved) {
    auto dumps = five_dumps();
    dumps[1].in_use = true;  // "a", the oldest
    RetentionLimits l;
    l.max_use = SizeLimit{250 * MiB, 0, false};
    l.max_age = std::chrono::seconds(1);
    l.keep_per_domain = 1;
    auto d = decide_retention(dumps, l, kBigDisk, 1000);
    for (const auto& id : d.remove) EXPECT_NE(id, "a");
    EXPECT_EQ(d.remove, (Ids{"b", "c", "d", "e"}));
}

TEST(Retention, KeepPerDomainKeepsTheCrashDumpBeforeManualOnes) {
    // The case of the report: one crash dump, then two manual dumps of the
    // same domain, KeepPerDomain=2. The oldest manual dump goes, not the crash dump.
    std::vector<StoredDump> stored = {
        {"crash", "dom1", 100, 10 * MiB, false, true},
        {"manual1", "dom1", 200, 10 * MiB, false, false},
        {"manual2", "dom1", 300, 10 * MiB, false, false},
        {"other", "dom2", 50, 10 * MiB, false, false},
    };
    RetentionLimits l;
    l.keep_per_domain = 2;
    auto d = decide_retention(stored, l, kBigDisk, 1000);
    EXPECT_EQ(d.remove, (Ids{"manual1"}));
    // KeepPerDomain=1: the crash dump is the one kept; with two, the newer.
    l.keep_per_domain = 1;
    EXPECT_EQ(decide_retention(stored, l, kBigDisk, 1000).remove, (Ids{"manual1", "manual2"}));
    stored.push_back({"crash2", "dom1", 400, 10 * MiB, false, true});
    EXPECT_EQ(decide_retention(stored, l, kBigDisk, 1000).remove, (Ids{"manual1", "manual2", "crash"}));
}

TEST(Retention, MaxUseAndKeepFreeRemoveManualDumpsBeforeCrashDumps) {
    std::vector<StoredDump> stored = {
        {"crash-old", "dom1", 100, 100 * MiB, false, true},
        {"manual-old", "dom2", 200, 100 * MiB, false, false},
        {"crash-new", "dom2", 300, 100 * MiB, false, true},
        {"manual-new", "dom1", 400, 100 * MiB, false, false},
    };
    RetentionLimits l;
    l.max_use = SizeLimit{150 * MiB, 0, false};
    EXPECT_EQ(decide_retention(stored, l, kBigDisk, 1000).remove, (Ids{"manual-old", "manual-new", "crash-old"}));
    l.max_use = SizeLimit{250 * MiB, 0, false};
    EXPECT_EQ(decide_retention(stored, l, kBigDisk, 1000).remove, (Ids{"manual-old", "manual-new"}));
    RetentionLimits free_limit;
    free_limit.keep_free = SizeLimit{100 * MiB, 0, false};
    FilesystemSpace tight{1000 * MiB, 50 * MiB};
    EXPECT_EQ(decide_retention(stored, free_limit, tight, 1000).remove, (Ids{"manual-old"}));
    // MaxAge goes by age alone.
    RetentionLimits age;
    age.max_age = std::chrono::seconds(750);
    EXPECT_EQ(decide_retention(stored, age, kBigDisk, 1000).remove, (Ids{"manual-old", "crash-old"}));
}

// Issue 32.5: a growing dump gets as much as fits without removing anything
// (up to what it could come to); old dumps go, least valued first, only
// when its next step needs their room; nothing goes when it cannot fit.
TEST(Retention, GrowingDumpGetsWhatFitsAndRemovesOnlyForItsNextStep) {
    RetentionLimits l;
    l.max_use = SizeLimit{600 * MiB, 0, false};  // 500 MiB stored: 100 MiB free under the limit
    auto g = grant_room(five_dumps(), l, kBigDisk, 1000, 8 * MiB, 64 * MiB);
    EXPECT_EQ(g.granted, 64 * MiB);
    EXPECT_TRUE(g.remove.empty());
    g = grant_room(five_dumps(), l, kBigDisk, 1000, 8 * MiB, 4096 * MiB);
    EXPECT_GE(g.granted, 99 * MiB);
    EXPECT_LE(g.granted, 100 * MiB);
    EXPECT_TRUE(g.remove.empty());
    g = grant_room(five_dumps(), l, kBigDisk, 1000, 150 * MiB, 4096 * MiB);
    EXPECT_EQ(g.granted, 150 * MiB);
    EXPECT_EQ(g.remove, (Ids{"a"}));
    g = grant_room(five_dumps(), l, kBigDisk, 1000, 700 * MiB, 4096 * MiB);
    EXPECT_EQ(g.granted, 0u);
    EXPECT_TRUE(g.remove.empty());
    EXPECT_NE(g.why_not.find("MaxUse"), std::string::npos) << g.why_not;
    // KeepFree= alike: 120 MiB free, 100 MiB kept free.
    RetentionLimits k;
    k.keep_free = SizeLimit{100 * MiB, 0, false};
    const FilesystemSpace tight{1000 * MiB, 120 * MiB};
    g = grant_room(five_dumps(), k, tight, 1000, 8 * MiB, 64 * MiB);
    EXPECT_GE(g.granted, 19 * MiB);
    EXPECT_LE(g.granted, 20 * MiB);
    EXPECT_TRUE(g.remove.empty());
    g = grant_room(five_dumps(), k, tight, 1000, 30 * MiB, 64 * MiB);
    EXPECT_EQ(g.granted, 30 * MiB);
    EXPECT_EQ(g.remove, (Ids{"a"}));
}
