// Configuration: every key, defaults, bad values refused with FILE:LINE, and
// drop-ins applied in lexical order after the main file.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <fstream>

#include "config.hpp"
#include "dump_job.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/writer.hpp"
#include "xendump_config.h"

using namespace xendump::daemon;
using xendump::test::TempDir;

namespace {

void write(const std::filesystem::path& p, const std::string& text) {
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

// A main file xen-dumpd.conf and its drop-in directory, in a fresh directory.
struct ConfigFiles {
    TempDir dir;
    std::filesystem::path main_file = dir / "xen-dumpd.conf";

    explicit ConfigFiles(const std::string& main_text = {}) {
        if (!main_text.empty()) write(main_file, main_text);
    }
    std::filesystem::path drop_in(const std::string& name, const std::string& text) const {
        const auto p = dir / "xen-dumpd.conf.d" / name;
        write(p, text);
        return p;
    }
};

// What an error says, or "no error" when there was none.
template <class Call>
std::string error_of_call(Call&& call) {
    try {
        call();
    } catch (const xendump::Error& e) {
        return e.what();
    }
    return "no error";
}

// `text` as the file test.conf on the defaults.
std::string error_of(const std::string& text) {
    Config c = Config::defaults();
    return error_of_call([&] { apply_config_text(c, text, "test.conf"); });
}

// load_config(`main_file`).
std::string load_error(const std::filesystem::path& main_file) {
    return error_of_call([&] { load_config(main_file); });
}
std::string load_error(const std::filesystem::path& main_file, MissingConfig missing) {
    return error_of_call([&] { load_config(main_file, missing); });
}

// Each text refused with an error that says `expect` (FILE:LINE: and what).
struct Refused {
    std::string text, expect;
};
void expect_refused(const std::vector<Refused>& cases) {
    for (const auto& c : cases) {
        const std::string err = error_of(c.text);
        EXPECT_NE(err.find(c.expect), std::string::npos) << c.text << " -> " << err;
    }
}

}  // namespace

TEST(Config, Defaults) {
    Config c = Config::defaults();
    EXPECT_EQ(c.dump_dir, XENDUMP_DEFAULT_DUMP_DIR);
    EXPECT_EQ(c.control_socket, XENDUMP_DEFAULT_CONTROL_SOCKET);
    EXPECT_EQ(c.on_crash, OnCrash::preserve);
    EXPECT_EQ(c.max_parallel, 1u);
    EXPECT_FALSE(c.max_use);
    ASSERT_TRUE(c.keep_free);
    EXPECT_TRUE(c.keep_free->relative);
    EXPECT_EQ(c.keep_free->percent, 5u);
    EXPECT_TRUE(c.digests);
    EXPECT_EQ(c.min_interval.count(), 0);
}

TEST(Config, EveryKey) {
    Config c = Config::defaults();
    apply_config_text(c,
                      "# comment\n"
                      "[Dump]\n"
                      "DumpDir=/srv/dumps\n"
                      "Host = sim:/tmp/host\n"
                      "ControlSocket=/run/x/sock\n"
                      "ControlGroup=xendump\n"
                      "OnCrash=destroy\n"
                      "MaxParallel=3\n"
                      "MaxUse=20G\n"
                      "KeepFree=10%\n"
                      "KeepPerDomain=4\n"
                      "MaxAge=2w\n"
                      "MinInterval=5min\n"
                      "; another comment\n"
                      "Digests=no\n",
                      "x.conf");
    EXPECT_EQ(c.dump_dir, "/srv/dumps");
    EXPECT_EQ(c.host, "sim:/tmp/host");
    EXPECT_EQ(c.control_socket, "/run/x/sock");
    EXPECT_EQ(c.control_group, "xendump");
    EXPECT_EQ(c.on_crash, OnCrash::destroy);
    EXPECT_EQ(c.max_parallel, 3u);
    ASSERT_TRUE(c.max_use);
    EXPECT_EQ(c.max_use->bytes, 20ull << 30);
    ASSERT_TRUE(c.keep_free);
    EXPECT_EQ(c.keep_free->percent, 10u);
    EXPECT_EQ(c.keep_per_domain, 4u);
    EXPECT_EQ(c.max_age.count(), 14 * 86400);
    EXPECT_EQ(c.min_interval.count(), 300);
    EXPECT_FALSE(c.digests);
}

TEST(Config, BadValuesNameTheLine) {
    expect_refused({
        {"[Dump]\nMaxParallel=0\n", "test.conf:2:"},
        {"[Dump]\n\nMaxParallel=lots\n", "test.conf:3:"},
        {"[Dump]\nMaxUse=12Q\n", "test.conf:2:"},
        {"[Dump]\nKeepFree=150%\n", "test.conf:2:"},
        {"[Dump]\nMaxAge=3 fortnights\n", "test.conf:2:"},
        {"[Dump]\nOnCrash=restart\n", "test.conf:2:"},
        {"[Dump]\nDigests=maybe\n", "test.conf:2:"},
        {"[Dump]\nDumpDir=relative/dir\n", "test.conf:2:"},
        {"[Dump]\nHost=kvm\n", "test.conf:2:"},
        {"[Dump]\n#\nNoSuchKey=1\n", "test.conf:3:"},
        {"[Other]\n", "test.conf:1:"},
        {"DumpDir=/x\n", "test.conf:1:"},
        {"[Dump]\njust words\n", "test.conf:2:"},
        {"[Dump\n", "test.conf:1:"},
        {"[Dump]\nMaxUse=-5G\n", "test.conf:2:"},
        {"[Dump]\nMaxUse=99999999999T\n", "test.conf:2:"},
    });
}

// Live=, MaxPause=, LiveRounds= (issue 35 item 3): the service's default
// for requests, and bad values named by their line.
TEST(Config, LiveKeys) {
    Config c = Config::defaults();
    EXPECT_EQ(c.live, xendump::daemon::LiveDefault::no);
    EXPECT_EQ(c.max_pause, std::chrono::milliseconds(100));
    EXPECT_EQ(c.live_rounds, 5u);
    apply_config_text(c, "[Dump]\nLive=consistent\nMaxPause=40ms\nLiveRounds=0\n", "test.conf");
    EXPECT_EQ(c.live, xendump::daemon::LiveDefault::consistent);
    EXPECT_EQ(c.max_pause, std::chrono::milliseconds(40));
    EXPECT_EQ(c.live_rounds, 0u);
    apply_config_text(c, "[Dump]\nLive=inconsistent\nMaxPause=250\n", "test.conf");
    EXPECT_EQ(c.live, xendump::daemon::LiveDefault::inconsistent);
    EXPECT_EQ(c.max_pause, std::chrono::milliseconds(250));
    apply_config_text(c, "[Dump]\nLive=\nMaxPause=\nLiveRounds=\n", "test.conf");
    EXPECT_EQ(c.live, xendump::daemon::LiveDefault::no);
    EXPECT_EQ(c.max_pause, std::chrono::milliseconds(100));
    EXPECT_EQ(c.live_rounds, 5u);
    expect_refused({
        {"[Dump]\nLive=yes\n", "test.conf:2:"},
        {"[Dump]\n\nMaxPause=0\n", "test.conf:3:"},
        {"[Dump]\nMaxPause=60001\n", "test.conf:2:"},
        {"[Dump]\nMaxPause=1s\n", "test.conf:2:"},
        {"[Dump]\nLiveRounds=101\n", "test.conf:2:"},
    });
    // A request that does not say takes them; one that does, and a crash dump, do not.
    xendump::daemon::DumpRequest r;
    r.precopy.max_pause = std::chrono::milliseconds(7);
    apply_config_text(c, "[Dump]\nLive=consistent\nMaxPause=40\nLiveRounds=3\n", "test.conf");
    auto d = xendump::daemon::with_live_default(r, c);
    EXPECT_TRUE(d.precopy.on);
    EXPECT_FALSE(d.live);
    EXPECT_EQ(d.precopy.max_pause, std::chrono::milliseconds(40));
    EXPECT_EQ(d.precopy.max_rounds, 3u);
    r.live_asked = true;
    EXPECT_FALSE(xendump::daemon::with_live_default(r, c).precopy.on);
    r.live_asked = false;
    r.reason = xendump::format::Reason::crash;
    EXPECT_FALSE(xendump::daemon::with_live_default(r, c).precopy.on);
}

TEST(Config, BadFileChangesNothing) {
    Config c = Config::defaults();
    EXPECT_THROW(apply_config_text(c, "[Dump]\nMaxParallel=4\nMaxUse=nonsense\n", "f"), xendump::Error);
    EXPECT_EQ(c.max_parallel, 1u);
}

TEST(Config, DropInsOverrideInLexicalOrder) {
    ConfigFiles f("[Dump]\nMaxParallel=2\nMaxUse=1G\nDigests=no\n");
    f.drop_in("20-b.conf", "[Dump]\nMaxParallel=4\n");
    f.drop_in("10-a.conf", "[Dump]\nMaxParallel=3\nMaxUse=2G\n");
    f.drop_in("30-ignored.txt", "[Dump]\nMaxParallel=9\n");
    Config c = load_config(f.main_file);
    EXPECT_EQ(c.max_parallel, 4u);
    EXPECT_EQ(c.max_use->bytes, 2ull << 30);
    EXPECT_FALSE(c.digests);
}

TEST(Config, BadDropInNamesItsFile) {
    ConfigFiles f("[Dump]\nMaxParallel=2\n");
    f.drop_in("50-bad.conf", "[Dump]\n\n\nKeepPerDomain=x\n");
    const std::string err = load_error(f.main_file);
    EXPECT_NE(err.find("50-bad.conf:4:"), std::string::npos) << "accepted a bad drop-in? " << err;
}

TEST(Config, MissingMainFileMeansDefaults) {
    TempDir dir;
    Config c = load_config(dir / "nothing.conf", MissingConfig::defaults);
    EXPECT_EQ(c.max_parallel, 1u);
}

TEST(Config, NamedMainFileThatIsMissingIsRefused) {
    TempDir dir;
    auto named = dir / "mistyped.conf";
    // Not the default path: it was named, so it must exist.
    const std::string err = load_error(named);
    EXPECT_NE(err.find(named.string()), std::string::npos) << "a missing --config file gave the defaults? " << err;
    EXPECT_THROW(load_config(named, MissingConfig::error), xendump::Error);
    // A dangling link is a named file that is missing, not an absent default.
    std::filesystem::create_symlink(dir / "gone.conf", dir / "link.conf");
    EXPECT_THROW(load_config(dir / "link.conf", MissingConfig::defaults), xendump::Error);
}

TEST(Config, DirectoryAsConfigFileIsRefused) {
    ConfigFiles f;
    std::filesystem::create_directories(f.main_file);
    for (auto missing : {MissingConfig::defaults, MissingConfig::error}) {
        const std::string what = load_error(f.main_file, missing);
        EXPECT_NE(what.find(f.main_file.string()), std::string::npos) << "a directory loaded as the defaults? " << what;
        EXPECT_NE(what.find("directory"), std::string::npos) << what;
    }
    // A drop-in that is a directory too.
    std::filesystem::remove(f.main_file);
    write(f.main_file, "[Dump]\nMaxParallel=2\n");
    std::filesystem::create_directories(f.dir / "xen-dumpd.conf.d" / "10-dir.conf");
    EXPECT_THROW(load_config(f.main_file), xendump::Error);
}

TEST(Config, OverridesWin) {
    Config c = Config::defaults();
    ConfigOverrides o;
    o.dump_dir = "/tmp/d";
    o.host = "sim:/h";
    o.apply(c);
    EXPECT_EQ(c.dump_dir, "/tmp/d");
    EXPECT_EQ(c.host, "sim:/h");
    EXPECT_EQ(c.control_socket, XENDUMP_DEFAULT_CONTROL_SOCKET);
    // A --dump-dir is the operator's, not the service's own DumpDir=.
    EXPECT_EQ(c.dump_dir_origin, DumpDirOrigin::command_line);
    EXPECT_EQ(Config::defaults().dump_dir_origin, DumpDirOrigin::configured);
}

TEST(Config, ThreadsFromOneTo64ElseTheCores) {
    Config c = Config::defaults();
    EXPECT_EQ(c.threads, 0u);
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    EXPECT_EQ(c.write_threads(), std::clamp(static_cast<unsigned>(CPU_COUNT(&set)), 1u, xendump::kMaxWriteThreads));
    apply_config_text(c, "[Dump]\nThreads=3\n", "t.conf");
    EXPECT_EQ(c.write_threads(), 3u);
    apply_config_text(c, "[Dump]\nThreads=8\n", "t.conf");
    EXPECT_EQ(c.write_threads(), 8u);
    apply_config_text(c, "[Dump]\nThreads=64\n", "t.conf");
    EXPECT_EQ(c.write_threads(), 64u);
    ConfigOverrides o;
    o.threads = 2;  // --threads
    o.apply(c);
    EXPECT_EQ(c.write_threads(), 2u);
    apply_config_text(c, "[Dump]\nThreads=\n", "t.conf");
    EXPECT_EQ(c.threads, 0u);
    std::vector<Refused> bad;
    for (const char* value : {"0", "65", "two", "-1", "2.5"})
        bad.push_back({std::string("[Dump]\nThreads=") + value + "\n", "test.conf:2: Threads="});
    expect_refused(bad);
}

// Format=, Compress=, DumpLevel= (issue 18 item 4): [Dump]'s for every
// domain, a [Domain NAME] section's (in any file) for the guest named NAME,
// key by key; unset keys come from [Dump] whatever the file order.
TEST(Config, DumpFormatKeysAndDomainSections) {
    ConfigFiles f("[Dump]\nFormat=kdump\nDumpLevel=31\n\n[Domain db01]\nDumpLevel=0\n");
    f.drop_in("10-legacy.conf", "[Domain legacy guest]\nFormat=v1\nDumpLevel=0\n"
                                "[Domain db01]\nCompress=lzo\n");
    f.drop_in("20-zlib.conf", "[Dump]\nCompress=zlib\n[Domain web01]\nDumpLevel=1\n");
    const Config c = load_config(f.main_file);
    EXPECT_EQ(c.format_for("anyone"), (DumpFormat{true, xendump::Compression::zlib, 31}));
    EXPECT_EQ(c.format_for("db01"), (DumpFormat{true, xendump::Compression::lzo, 0}));
    EXPECT_EQ(c.format_for("web01"), (DumpFormat{true, xendump::Compression::zlib, 1}));
    EXPECT_EQ(c.format_for("legacy guest"), (DumpFormat{false, xendump::Compression::zlib, 0}));
    EXPECT_EQ(Config::defaults().format_for("web01"), DumpFormat{});
}

TEST(Config, DumpFormatBadValuesNameTheLine) {
    expect_refused({
        {"[Dump]\nFormat=v2\n", "test.conf:2: Format=: Format must be \"v1\" or \"kdump\""},
        {"[Dump]\n\nCompress=gzip\n", "test.conf:3: Compress=:"},
        {"[Dump]\nDumpLevel=32\n", "test.conf:2: DumpLevel=: DumpLevel must be a number from 0 to 31"},
        {"[Dump]\nDumpLevel=-1\n", "test.conf:2: DumpLevel=:"},
        {"[Dump]\nDumpLevel=3x\n", "test.conf:2: DumpLevel=:"},
        {"[Domain]\nFormat=kdump\n", "test.conf:1: [Domain] needs the guest's name"},
        {"[Domain web01]\nThreads=2\n", "test.conf:2: Threads= cannot be set per domain"},
        {"[Domain web01]\nDumpLevel=40\n", "test.conf:2: DumpLevel=:"},
        {"[Domains web01]\n", "test.conf:1: unknown section [Domains web01]"},
    });
}

// A DumpLevel= above 0 that applies to v1 dumps is refused once every file
// is read, naming the DumpLevel= line and the Format= line; the same keys
// where Format=kdump applies are fine.
TEST(Config, DumpLevelWithV1IsRefusedNamingBothLines) {
    ConfigFiles f("[Dump]\nDumpLevel=31\n");
    const std::string err = load_error(f.main_file);
    EXPECT_NE(err.find(f.main_file.string() + ":2: DumpLevel=31 needs Format=kdump (Format= is not set: v1)"),
              std::string::npos)
        << "accepted DumpLevel=31 for v1 dumps? " << err;
    write(f.main_file, "[Dump]\nFormat=kdump\nDumpLevel=31\n");
    EXPECT_NO_THROW(load_config(f.main_file));
    // A drop-in's [Domain] section makes one guest v1: [Dump]'s level does not fit it.
    const auto drop_in = f.drop_in("legacy.conf", "[Domain legacy]\n\nFormat=v1\n");
    const std::string domain_err = load_error(f.main_file);
    EXPECT_NE(domain_err.find(f.main_file.string() + ":3: DumpLevel=31 needs Format=kdump, but domain "
                                                     "legacy is written as v1 (Format=v1 at " +
                              drop_in.string() + ":3)"),
              std::string::npos)
        << "accepted DumpLevel=31 for a v1 domain? " << domain_err;
    f.drop_in("legacy.conf", "[Domain legacy]\nFormat=v1\nDumpLevel=0\n");
    EXPECT_EQ(load_config(f.main_file).format_for("legacy"), DumpFormat{});
}

namespace {

// Every key xen-dumpd.conf(5) documents (".It Cm KEY="), in its order.
std::vector<std::string> documented_keys() {
    std::ifstream in(xendump::test::source_root() / "man" / "xen-dumpd.conf.5");
    std::vector<std::string> keys;
    for (std::string line; std::getline(in, line);) {
        const std::string lead = ".It Cm ";
        if (!line.starts_with(lead)) continue;
        const auto eq = line.find('=');
        if (eq != std::string::npos) keys.push_back(line.substr(lead.size(), eq - lead.size()));
    }
    return keys;
}

}  // namespace

// `xen-dumpctl config` shows every key with its default (issue 36 item 3):
// the table of defaults names exactly the keys the parser takes and the
// man page documents, in the man page's order.
TEST(Config, EveryKeyHasADefaultToShowAndIsDocumented) {
    std::vector<std::string> table;
    for (const auto& d : key_defaults()) {
        EXPECT_TRUE(is_config_key(d.key)) << d.key;
        table.push_back(d.key);
    }
    EXPECT_EQ(table, documented_keys());
    EXPECT_FALSE(is_config_key("NoSuchKey"));
    // And the defaults are the values the parser's defaults hold.
    const Config c = Config::defaults();
    auto value_of = [](const std::string& key) {
        for (const auto& d : key_defaults())
            if (d.key == key) return d.value;
        return std::string("?");
    };
    EXPECT_EQ(value_of("DumpDir"), c.dump_dir.string());
    EXPECT_EQ(value_of("ControlSocket"), c.control_socket.string());
    EXPECT_EQ(value_of("MaxParallel"), std::to_string(c.max_parallel));
    EXPECT_EQ(value_of("KeepPerDomain"), std::to_string(c.keep_per_domain));
    EXPECT_EQ(value_of("Digests") == "yes", c.digests);
}

// Each KEY=VALUE applied is remembered with its FILE:LINE and section, and
// the files read in order.
TEST(Config, RemembersWhereEachValueCameFrom) {
    ConfigFiles files("[Dump]\nMaxParallel=2\n\n[Domain web01]\nFormat=kdump\n");
    const auto d = files.drop_in("10-local.conf", "# local\n[Dump]\nMaxParallel=3\n");
    const Config c = load_config(files.main_file);
    ASSERT_EQ(c.files.size(), 2u);
    EXPECT_EQ(c.files[0], files.main_file.string());
    EXPECT_EQ(c.files[1], d.string());
    ASSERT_EQ(c.lines.size(), 3u);
    EXPECT_EQ(c.lines[0].origin, files.main_file.string() + ":2");
    EXPECT_EQ(c.lines[1].section, "Domain web01");
    EXPECT_EQ(c.lines[1].key, "Format");
    EXPECT_EQ(c.lines[2].origin, d.string() + ":3");
    EXPECT_EQ(c.max_parallel, 3u);
}

// Issue 34: the [Upload] section, its keys and defaults.
TEST(Config, UploadSection) {
    const Config d = Config::defaults();
    EXPECT_FALSE(d.upload.enabled());
    EXPECT_EQ(d.upload.part_size, 16ull << 20);
    EXPECT_EQ(d.upload.in_flight, 3u);
    EXPECT_FALSE(d.upload.keep_local);
    EXPECT_EQ(d.upload.mode, UploadMode::spool);

    Config c = Config::defaults();
    apply_config_text(c,
                      "[Dump]\nMaxParallel=2\n"
                      "[Upload]\n"
                      "Target = s3://crash-dumps/fleet/xen/\n"
                      "Endpoint=http://127.0.0.1:7480\n"
                      "Region=eu-west-1\n"
                      "Mode=spool\n"
                      "KeepLocal=yes\n"
                      "PartSize=64M\n"
                      "PartsInFlight=8\n"
                      "[Dump]\nMaxParallel=3\n",
                      "x.conf");
    EXPECT_TRUE(c.upload.enabled());
    EXPECT_EQ(c.upload.bucket, "crash-dumps");
    EXPECT_EQ(c.upload.prefix, "fleet/xen");
    EXPECT_EQ(c.upload.target(), "s3://crash-dumps/fleet/xen");
    EXPECT_EQ(c.upload.endpoint, "http://127.0.0.1:7480");
    EXPECT_EQ(c.upload.region, "eu-west-1");
    EXPECT_TRUE(c.upload.keep_local);
    EXPECT_EQ(c.upload.part_size, 64ull << 20);
    EXPECT_EQ(c.upload.in_flight, 8u);
    EXPECT_EQ(c.max_parallel, 3u);
    ASSERT_GE(c.lines.size(), 2u);
    EXPECT_EQ(c.lines[1].section, "Upload");
    EXPECT_EQ(c.lines[1].origin, "x.conf:4");

    // A bucket alone is a target too; an empty Target= turns uploading off again.
    apply_config_text(c, "[Upload]\nTarget=s3://bucket\n", "y.conf");
    EXPECT_EQ(c.upload.bucket, "bucket");
    EXPECT_EQ(c.upload.prefix, "");
    apply_config_text(c, "[Upload]\nTarget=\n", "z.conf");
    EXPECT_FALSE(c.upload.enabled());
}

// Mode=stream (issue 34 item 2): taken; KeepLocal=yes with it is refused
// once every file is read (a streamed dump has no local copy), naming both
// lines, wherever each was set.
TEST(Config, UploadModeStreamAndKeepLocal) {
    ConfigFiles f("[Upload]\nTarget=s3://crash-dumps/xen\nMode=stream\n");
    const Config c = load_config(f.main_file);
    EXPECT_EQ(c.upload.mode, UploadMode::stream);
    EXPECT_FALSE(c.upload.keep_local);
    const auto d = f.drop_in("keep.conf", "[Upload]\n\nKeepLocal=yes\n");
    const std::string err = load_error(f.main_file);
    EXPECT_NE(err.find(d.string() + ":3: KeepLocal=yes needs Mode=spool, but Mode=stream is set at " +
                       f.main_file.string() + ":3"),
              std::string::npos)
        << err;
    f.drop_in("keep.conf", "[Upload]\nKeepLocal=yes\nMode=spool\n");
    EXPECT_EQ(load_config(f.main_file).upload.mode, UploadMode::spool);
    f.drop_in("keep.conf", "[Upload]\nKeepLocal=no\n");
    EXPECT_NO_THROW(load_config(f.main_file));
}

TEST(Config, UploadBadValuesNameTheLine) {
    expect_refused({
        {"[Upload]\nTarget=/srv/dumps\n", "test.conf:2: Target=: Target must be s3://BUCKET/PREFIX"},
        {"[Upload]\nTarget=s3://Bad_Bucket/x\n", "test.conf:2: Target=: not a bucket name"},
        {"[Upload]\nTarget=s3://b\n", "test.conf:2:"},
        {"[Upload]\nTarget=s3://bucket//x\n", "test.conf:2: Target=:"},
        {"[Upload]\n\nEndpoint=ftp://store\n", "test.conf:3: Endpoint=:"},
        {"[Upload]\nEndpoint=https://store/x?y\n", "test.conf:2: Endpoint=:"},
        {"[Upload]\nRegion=us east\n", "test.conf:2: Region=:"},
        {"[Upload]\nMode=sometimes\n", "test.conf:2: Mode=: Mode must be \"spool\" or \"stream\""},
        {"[Upload]\nKeepLocal=maybe\n", "test.conf:2: KeepLocal=:"},
        {"[Upload]\nPartSize=1M\n", "test.conf:2: PartSize=: PartSize must be from 5M to 5G"},
        {"[Upload]\nPartSize=6G\n", "test.conf:2: PartSize=:"},
        {"[Upload]\nPartSize=lots\n", "test.conf:2: PartSize=:"},
        {"[Upload]\nPartsInFlight=0\n", "test.conf:2: PartsInFlight=: PartsInFlight must be at least 1"},
        {"[Upload]\nPartsInFlight=17\n", "test.conf:2: PartsInFlight=: must be at most 16"},
        {"[Upload]\nMaxUse=1G\n", "test.conf:2: MaxUse= belongs in [Dump], not [Upload]"},
        {"[Upload]\nSecretKey=x\n", "test.conf:2: unknown key \"SecretKey\" in [Upload]"},
        {"[Dump]\nTarget=s3://bucket/x\n", "test.conf:2: Target= belongs in the [Upload] section"},
        {"[Domain web01]\nKeepLocal=yes\n", "test.conf:2: KeepLocal= belongs in the [Upload] section"},
    });
    // A bad value changes nothing of what was there.
    Config c = Config::defaults();
    apply_config_text(c, "[Upload]\nTarget=s3://good/p\n", "a.conf");
    EXPECT_THROW(apply_config_text(c, "[Upload]\nTarget=s3://other/q\nPartSize=1K\n", "b.conf"), xendump::Error);
    EXPECT_EQ(c.upload.target(), "s3://good/p");
}
