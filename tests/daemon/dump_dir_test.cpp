// The dump directory: scanning dumps and sidecars, unique names, leftovers.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>

#include "dump_dir.hpp"
#include "test_support.hpp"
#include "xendump/fd.hpp"

using namespace xendump::daemon;
using xendump::test::TempDir;

TEST(DumpDir, CreatedPrivate) {
    TempDir dir;
    auto d = dir / "a" / "dumps";
    ensure_dump_dir(d);
    struct stat st {};
    ASSERT_EQ(::stat(d.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(DumpDir, UniqueNamesNeverOverwrite) {
    TempDir dir;
    auto p = unique_dump_path(dir.path(), "web-7-20240101T000000Z.core");
    EXPECT_EQ(p.filename(), "web-7-20240101T000000Z.core");
    std::ofstream(p) << "x";
    auto p1 = unique_dump_path(dir.path(), "web-7-20240101T000000Z.core");
    EXPECT_EQ(p1.filename(), "web-7-20240101T000000Z-1.core");
    // A refused dump leaves only its sidecar: that name is taken too.
    std::ofstream(sidecar_path(p1)) << "{}";
    EXPECT_EQ(unique_dump_path(dir.path(), "web-7-20240101T000000Z.core").filename(), "web-7-20240101T000000Z-2.core");
}

TEST(DumpDir, ScanPairsDumpsWithSidecarsOldestFirst) {
    TempDir dir;
    Sidecar newer;
    newer.domain_name = "b";
    newer.uuid = "u-b";
    newer.start_time = 2000;
    newer.dump_file = "b.core";
    write_sidecar(dir / "b.core.json", newer);
    std::ofstream(dir / "b.core") << std::string(10000, 'x');
    Sidecar older = newer;
    older.domain_name = "a";
    older.uuid = "";
    older.start_time = 1000;
    older.result = DumpOutcome::refused;
    write_sidecar(dir / "a.core.json", older);  // refused: no dump file
    std::ofstream(dir / "notes.txt") << "not a dump";
    std::ofstream(dir / (std::string(xendump::AtomicFile::kTempPrefix) + "x.core.123")) << "partial";
    auto entries = scan_dump_dir(dir.path());
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].sidecar.filename(), "a.core.json");
    EXPECT_EQ(entries[1].dump.filename(), "b.core");
    EXPECT_GE(entries[1].bytes_on_disk, 10000u);
    auto stored = to_stored(entries, dir / "b.core");
    EXPECT_EQ(stored[0].domain, "a");    // no uuid: by name
    EXPECT_EQ(stored[1].domain, "u-b");
    EXPECT_TRUE(stored[1].in_use);
    EXPECT_FALSE(stored[0].in_use);

    auto removed = clean_temporaries(dir.path());
    ASSERT_EQ(removed.size(), 1u);
    EXPECT_FALSE(std::filesystem::exists(dir / removed[0]));
    EXPECT_GT(remove_dump(dir / "b.core"), 0u);
    EXPECT_FALSE(std::filesystem::exists(dir / "b.core"));
    EXPECT_FALSE(std::filesystem::exists(dir / "b.core.json"));
}
