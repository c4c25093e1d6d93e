// The dump directory: scanning dumps and sidecars, unique names, leftovers.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <set>

#include "dump_dir.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

using namespace xendump::daemon;
using xendump::test::TempDir;

namespace {

unsigned mode_of(const std::filesystem::path& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
}

// A directory with mode 0755 whatever the umask.
void make_open_dir(const std::filesystem::path& p) {
    ASSERT_EQ(::mkdir(p.c_str(), 0755), 0);
    ASSERT_EQ(::chmod(p.c_str(), 0755), 0);
}

// A sidecar of `file` (a dump of `name`, started at `start`).
Sidecar sidecar_for(const std::string& name, const std::string& uuid, int64_t start, const std::string& file) {
    Sidecar s;
    s.domain_name = name;
    s.uuid = uuid;
    s.start_time = start;
    s.dump_file = file;
    return s;
}

}  // namespace

TEST(DumpDir, CreatedPrivate) {
    TempDir dir;
    auto d = dir / "a" / "dumps";
    ensure_dump_dir(d, DumpDirOrigin::configured);
    EXPECT_EQ(mode_of(d) & 0777, 0700u);
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
    Sidecar newer = sidecar_for("b", "u-b", 2000, "b.core");
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

TEST(DumpDir, ExistingConfiguredDirIsMadePrivate) {
    TempDir dir;
    auto d = dir / "dumps";
    make_open_dir(d);
    ensure_dump_dir(d, DumpDirOrigin::configured);
    EXPECT_EQ(mode_of(d), 0700u);
}

TEST(DumpDir, CommandLineDirMustExistAndIsLeftAsItIs) {
    TempDir dir;
    auto mistyped = dir / "nonexistent" / "dir";
    try {
        ensure_dump_dir(mistyped, DumpDirOrigin::command_line);
        FAIL() << "accepted a missing --dump-dir";
    } catch (const xendump::Error& e) {
        EXPECT_NE(std::string(e.what()).find(mistyped.string()), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "nonexistent"));
    // An existing one is the operator's: its mode is theirs.
    auto given = dir / "given";
    make_open_dir(given);
    ensure_dump_dir(given, DumpDirOrigin::command_line);
    EXPECT_EQ(mode_of(given), 0755u);
    // A file where the directory should be is refused either way.
    std::ofstream(dir / "file") << "x";
    EXPECT_THROW(ensure_dump_dir(dir / "file", DumpDirOrigin::configured), xendump::Error);
}

TEST(DumpDir, VacuumNeverCreatesTheDirectory) {
    TempDir dir;
    Config config = Config::defaults();
    config.dump_dir = dir / "nonexistent" / "dir";
    EXPECT_THROW(vacuum_dump_dir(config), xendump::Error);
    EXPECT_THROW(plan_vacuum(config), xendump::Error);
    EXPECT_FALSE(std::filesystem::exists(dir / "nonexistent"));
}

TEST(DumpDir, DanglingSymlinkAtTheNextNameIsSkippedNotFollowed) {
    TempDir dir;
    auto target = dir / "elsewhere.core";
    std::filesystem::create_symlink(target, dir / "web-7-20240101T000000Z.core");
    auto p = unique_dump_path(dir.path(), "web-7-20240101T000000Z.core");
    EXPECT_EQ(p.filename(), "web-7-20240101T000000Z-1.core");
    // The same for a link where the sidecar would go.
    std::filesystem::create_symlink(target, dir / "web-7-20240101T000000Z-1.core.json");
    EXPECT_EQ(unique_dump_path(dir.path(), "web-7-20240101T000000Z.core").filename(), "web-7-20240101T000000Z-2.core");
    EXPECT_FALSE(std::filesystem::exists(target));
}

TEST(DumpDir, FileNameEncoding) {
    EXPECT_EQ(encode_file_name_part("web01"), "web01");
    EXPECT_EQ(encode_file_name_part("db-2.prod_x+y"), "db-2.prod_x+y");
    EXPECT_EQ(encode_file_name_part(".hidden"), "%2Ehidden");
    EXPECT_EQ(encode_file_name_part(".xendump-tmp.x"), "%2Exendump-tmp.x");
    EXPECT_EQ(encode_file_name_part("-rf"), "%2Drf");
    EXPECT_EQ(encode_file_name_part("a/b"), "a%2Fb");
    EXPECT_EQ(encode_file_name_part("a b"), "a%20b");
    EXPECT_EQ(encode_file_name_part("50%"), "50%25");
    EXPECT_EQ(encode_file_name_part("x\n\x1b[0m"), "x%0A%1B%5B0m");
    EXPECT_EQ(encode_file_name_part("\xc3\xa9"), "%C3%A9");
    EXPECT_EQ(encode_file_name_part(".."), "%2E.");
    // Distinct names, distinct file names (the old '_' for everything merged these).
    std::vector<std::string> names = {"a b", "a_b", "a/b", "a%20b", "a.b", "a\tb", ".ab", "%2Eab"};
    std::set<std::string> encoded;
    for (const auto& n : names) EXPECT_TRUE(encoded.insert(encode_file_name_part(n)).second) << n;
    // Long names are cut, never inside an escape.
    std::string long_name(100, 'a');
    long_name += std::string(100, '/');
    auto cut = encode_file_name_part(long_name);
    EXPECT_LE(cut.size(), kMaxEncodedName);
    EXPECT_EQ(cut.size(), 127u);  // 100 + 9 * 3
    EXPECT_EQ(cut.substr(cut.size() - 3), "%2F");

    EXPECT_EQ(dump_file_name(".hidden", 7, 1704067200), "%2Ehidden-7-20240101T000000Z.core");
    EXPECT_EQ(dump_file_name("", 3, 0), "domain-3-19700101T000000Z.core");
}

TEST(DumpDir, DumpsWithHiddenOrTemporaryLikeNamesAreCountedAndSurviveCleanup) {
    // Names older versions gave to guests called ".hidden", ".xendump-tmp.web"
    // and ".xendump-room.web": finished dumps, with sidecars.
    TempDir dir;
    const std::vector<std::string> finished = {".hidden-1-20240101T000000Z.core",
                                               ".xendump-tmp.web-2-20240101T000000Z.core",
                                               ".xendump-room.web-3-20240101T000000Z.core"};
    for (const auto& f : finished) {
        std::ofstream(dir / f) << std::string(5000, 'x');
        Sidecar s;
        s.domain_name = f.substr(0, f.find('-', 1));
        s.start_time = 1000;
        write_sidecar(sidecar_path(dir / f), s);
    }
    // Real leftovers: a writer's temporaries and a room without a sidecar.
    const std::vector<std::string> leftovers = {std::string(xendump::AtomicFile::kTempPrefix) + "web-4-X.core.aB3dE9",
                                                std::string(xendump::AtomicFile::kTempPrefix) + "web-4-X.core.json.Zz09aa",
                                                std::string(kSidecarRoomPrefix) + "web-4-X.core"};
    for (const auto& f : leftovers) std::ofstream(dir / f) << "partial";

    auto entries = scan_dump_dir(dir.path());
    ASSERT_EQ(entries.size(), finished.size());
    std::set<std::string> seen;
    for (const auto& e : entries) seen.insert(e.dump.filename().string());
    EXPECT_EQ(seen, std::set<std::string>(finished.begin(), finished.end()));

    auto removed = clean_temporaries(dir.path());
    EXPECT_EQ(std::set<std::string>(removed.begin(), removed.end()),
              std::set<std::string>(leftovers.begin(), leftovers.end()));
    for (const auto& f : finished) {
        EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
        EXPECT_TRUE(std::filesystem::exists(sidecar_path(dir / f))) << f;
    }
}

// Issue 20 item 3: a dump's DUMP.dmesg.txt (its guest's kernel log) is part
// of its record: counted with it, never taken for a dump, removed with it,
// left alone by cleanup, and its name is never reused for a new dump.
TEST(DumpDir, DmesgFileCountsAndGoesWithItsDump) {
    TempDir dir;
    Sidecar s = sidecar_for("web", "u-w", 1000, "web-3-20261201T000000Z.core");
    s.reason = "crash";
    const auto dump = dir / s.dump_file;
    std::ofstream(dump) << std::string(10000, 'x');
    const auto dmesg = dmesg_path(dump);
    EXPECT_EQ(dmesg.filename(), "web-3-20261201T000000Z.core.dmesg.txt");
    std::ofstream(dmesg) << std::string(100000, 'l');
    write_sidecar(sidecar_path(dump), s);
    auto entries = scan_dump_dir(dir.path());
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].dump, dump);
    EXPECT_GE(entries[0].bytes_on_disk, 110000u);
    EXPECT_TRUE(clean_temporaries(dir.path()).empty());
    EXPECT_TRUE(std::filesystem::exists(dmesg));

    // A leftover .dmesg.txt takes its name: a new dump gets another one.
    std::ofstream(dir / "db-4-20261201T000000Z.core.dmesg.txt") << "old";
    EXPECT_EQ(unique_dump_path(dir.path(), "db-4-20261201T000000Z.core").filename(), "db-4-20261201T000000Z-1.core");

    EXPECT_GE(remove_dump(dump), 110000u);
    EXPECT_FALSE(std::filesystem::exists(dump));
    EXPECT_FALSE(std::filesystem::exists(dmesg));
    EXPECT_FALSE(std::filesystem::exists(sidecar_path(dump)));
}

// Issue 34: a dump waiting for its upload. The storage limits may remove it
// (its upload state goes with it), but never while it is being uploaded;
// the state directory is neither a dump nor a leftover.
TEST(DumpDir, UploadStateGoesWithItsDumpAndTheDumpBeingUploadedStays) {
    TempDir dir;
    const auto dump = dir / "web-7-20240101T000000Z.core";
    std::ofstream(dump) << "dump";
    write_sidecar(sidecar_path(dump), sidecar_for("web", "u", 100, dump.filename().string()));
    const auto state = upload_state_path(dump);
    EXPECT_EQ(state, dir / ".xen-dumpd-uploads" / "web-7-20240101T000000Z.core.json");
    std::filesystem::create_directories(state.parent_path());
    std::ofstream(state) << "{}";

    auto entries = scan_dump_dir(dir.path());
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_TRUE(clean_temporaries(dir.path()).empty());
    EXPECT_FALSE(to_stored(entries).at(0).in_use);
    set_uploading(dump);
    EXPECT_TRUE(to_stored(entries).at(0).in_use);
    set_uploading({});
    EXPECT_FALSE(to_stored(entries).at(0).in_use);

    remove_dump(dump);
    EXPECT_FALSE(std::filesystem::exists(dump));
    EXPECT_FALSE(std::filesystem::exists(sidecar_path(dump)));
    EXPECT_FALSE(std::filesystem::exists(state)) << "the pending upload is dropped with its dump";
    EXPECT_TRUE(std::filesystem::is_directory(state.parent_path()));
    EXPECT_TRUE(scan_dump_dir(dir.path()).empty());
}
