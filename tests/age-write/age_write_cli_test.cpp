// Issue 33 item 2: the programs. xen-dumpd --domain -r/-R writes
// NAME.core.age (v1 and compact), whose sidecar says it is encrypted and to
// how many recipients, with no DUMP.dmesg.txt beside it; xen-dump-convert
// -r writes NAME.kdump.age; both decrypt with age -d to what the program
// writes without -r. The service with Recipient= in a drop-in dumps a
// crashed guest encrypted, its marker never in clear in the dump directory
// or the service's open files, during and after. Recipients that do not
// parse are refused: on the command line, in a -R file (FILE:LINE) and in
// the configuration (FILE:LINE). An encrypted dump of a crashed Linux guest
// has its kernel log beside it as NAME.dmesg.txt.age (age -d gives what
// xen-dumpctl dmesg -i prints), its panic line in no file in clear, and in
// the sidecar and the journal only with ClearMetadata=.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "age_write_helpers.hpp"
#include "config.hpp"
#include "dump_dir.hpp"
#include "fixture_host.hpp"
#include "guest_ram.hpp"
#include "sidecar.hpp"
#include "service_harness.hpp"
#include "xendump/error.hpp"
#include "xendump/simulated_host.hpp"

namespace xendump::test::agewrite {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kMarker = "XENDUMP-AGE-CLI-MARKER-d41c07";

// A simulated host (xen-dump-sim create) in dir/host with a 64-bit PV guest,
// domid 7, "guest7", of 1024 random pages, the marker in page 50.
fs::path marked_host(const fs::path& dir) {
    std::vector<char> ram(1024 * 4096);
    std::mt19937 rng(7);
    for (auto& c : ram) c = static_cast<char>(rng());
    std::memcpy(ram.data() + 50 * 4096 + 300, kMarker.data(), kMarker.size());
    std::ofstream(dir / "ram.img", std::ios::binary).write(ram.data(), static_cast<std::streamsize>(ram.size()));
    const json guest = {{"domid", 7},         {"name", "guest7"},
                        {"uuid", "0d5e9a3c-1f2b-4c6d-8e9f-000000000007"},
                        {"type", "pv"},       {"guest_width", 8},
                        {"vcpus", 2},         {"p2m_size", 2048},
                        {"p2m_format", "tree"}, {"extents", json::array({json::array({0, 0x100000, 1024})})},
                        {"memory", {{"image", (dir / "ram.img").string()}}},
                        {"state", "running"}};
    std::ofstream(dir / "spec.json") << json{{"xen_version", "4.17.0"}, {"domains", json::array({guest})}}.dump(2);
    const RunResult r = run({"xen-dump-sim", "create", (dir / "host").string(), (dir / "spec.json").string()});
    if (r.exit_code != 0) throw std::runtime_error("xen-dump-sim create: " + r.err);
    return dir / "host";
}

struct Cli : ::testing::Test {
    TempDir dir;
    fs::path dumps = dir / "dumps", conf = dir / "xen-dumpd.conf";
    fs::path host;
    AgeKey key;
    void SetUp() override {
        fs::create_directory(dumps);
        std::ofstream(conf) << "[Dump]\nKeepFree=0\n";
        host = marked_host(dir.path());
        key = age_keygen(dir.path());
    }
    RunResult dumpd(std::vector<std::string> extra) {
        std::vector<std::string> argv{"xen-dumpd", "--config", conf.string(), "--socket", (dir / "none.sock").string(),
                                      "--host", "sim:" + host.string(), "--domain", "guest7", "--dump-dir", dumps.string(), "-q"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return run(argv);
    }
};

TEST_F(Cli, DumpdWritesCoreAge) {
    for (const std::vector<std::string>& format :
         {std::vector<std::string>{}, std::vector<std::string>{"--format", "kdump", "--compress", "lz4"}}) {
        std::vector<std::string> args = format;
        args.insert(args.end(), {"-r", key.recipient});
        RunResult r = dumpd(args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const fs::path dump = r.out.substr(0, r.out.find('\n'));
        EXPECT_TRUE(dump.string().ends_with(".core.age")) << dump;
        EXPECT_TRUE(starts_with_age_magic(dump));
        EXPECT_FALSE(contains(slurp(dump), kMarker));
        EXPECT_FALSE(fs::exists(dump.string() + ".dmesg.txt"));
        const auto side = nlohmann::json::parse(slurp_text(dump.string() + ".json"));
        EXPECT_EQ(side.value("encrypted", false), true);
        EXPECT_EQ(side.value("recipients", 0), 1);
        EXPECT_EQ(side.value("result", ""), "ok");
        // No panic line in clear (this guest has no kernel: guest_log says why there is no log).
        EXPECT_TRUE(side.value("guest_panic", json()).is_null()) << side.dump();
        EXPECT_FALSE(fs::exists(daemon::dmesg_path(dump)));
        EXPECT_EQ(side.value("file_size", uint64_t{0}), fs::file_size(dump));
        const auto plain = age_decrypt(key, dump, dir / "back");
        EXPECT_TRUE(contains(plain, kMarker));
        EXPECT_TRUE(files_with_marker({dumps}, kMarker).empty());
    }
}

TEST_F(Cli, DumpdOutputDecryptsToThePlainOutput) {
    // -o: the name given; -R: the key in a recipients file (comments and blank lines as age reads them).
    std::ofstream(dir / "recipients") << "# the dump key\n\n" << key.recipient << "\n";
    // The two dumps run at once, to be written in the same second (TIME=).
    for (int attempt = 0; attempt < 10; ++attempt) {
        fs::remove(dir / "plain.core");
        fs::remove(dir / "enc.core");
        auto plain_run = std::async(std::launch::async, [&] { return dumpd({"-o", (dir / "plain.core").string()}); });
        RunResult r = dumpd({"-o", (dir / "enc.core").string(), "-R", (dir / "recipients").string()});
        ASSERT_EQ(plain_run.get().exit_code, 0);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const auto plain = slurp(dir / "plain.core");
        const auto back = age_decrypt(key, dir / "enc.core", dir / "back");
        if (back == plain) break;  // else written in two different seconds: again
        if (attempt == 9) ADD_FAILURE() << "age -d of the -R dump is not the plain dump";
    }
    EXPECT_TRUE(starts_with_age_magic(dir / "enc.core"));
}

TEST_F(Cli, BadRecipientsAreRefused) {
    RunResult r = dumpd({"-r", key.recipient, "-r", "age1notakey"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("-r #2"), std::string::npos) << r.err;
    std::ofstream(dir / "bad") << key.recipient << "\nssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ\n";
    r = dumpd({"-R", (dir / "bad").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find((dir / "bad").string() + ":2"), std::string::npos) << r.err;
    r = dumpd({"-R", (dir / "missing").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(fs::is_empty(dumps));
    // Only with --domain.
    EXPECT_EQ(run({"xen-dumpd", "-r", key.recipient}).exit_code, 2);
}

TEST_F(Cli, ConvertWritesKdumpAge) {
    const fs::path v1 = dir / "src.core";
    ASSERT_EQ(dumpd({"-o", v1.string()}).exit_code, 0);
    RunResult plain = run({"xen-dump-convert", "-q", "--format", "kdump", v1.string()});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const fs::path out = dir / "src.kdump";
    ASSERT_TRUE(fs::exists(out));
    const auto plain_bytes = slurp(out);
    fs::remove(out);
    RunResult enc = run({"xen-dump-convert", "-q", "--format", "kdump", "-r", key.recipient, v1.string()});
    ASSERT_EQ(enc.exit_code, 0) << enc.err;
    EXPECT_FALSE(fs::exists(out));
    ASSERT_TRUE(fs::exists(dir / "src.kdump.age"));
    EXPECT_TRUE(age_decrypt(key, dir / "src.kdump.age", dir / "back") == plain_bytes);
    EXPECT_FALSE(contains(slurp(dir / "src.kdump.age"), kMarker));
    // An encrypted output cannot be read back: no --remove-source, an existing one is not taken as done.
    EXPECT_EQ(run({"xen-dump-convert", "--remove-source", "-r", key.recipient, v1.string()}).exit_code, 2);
    EXPECT_EQ(run({"xen-dump-convert", "-q", "--format", "kdump", "-r", key.recipient, v1.string()}).exit_code, 1);
    RunResult bad = run({"xen-dump-convert", "-r", "age1zz", v1.string()});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("-r #1"), std::string::npos) << bad.err;
}

TEST(Config, RecipientsAndTheirErrors) {
    TempDir dir;
    const AgeKey a = age_keygen(dir.path(), "a"), b = age_keygen(dir.path(), "b");
    std::ofstream(dir / "keys") << "# ops\n" << b.recipient << "\n";
    daemon::Config cfg = daemon::Config::defaults();
    daemon::apply_config_text(cfg,
                              "[Dump]\nRecipient=" + a.recipient + "\n[Domain web]\nRecipientsFile=" +
                                  (dir / "keys").string() + "\nRecipient=" + a.recipient + "\n[Domain plain]\nRecipient=\n",
                              "x.conf");
    EXPECT_EQ(cfg.recipients_for("db"), std::vector<std::string>{a.recipient});
    EXPECT_EQ(cfg.recipients_for("web"), (std::vector<std::string>{b.recipient, a.recipient}));
    EXPECT_TRUE(cfg.recipients_for("plain").empty());
    auto error_of = [&](const std::string& text) {
        daemon::Config c = daemon::Config::defaults();
        try {
            daemon::apply_config_text(c, text, "x.conf");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(error_of("[Dump]\n\nRecipient=age1nope\n").find("x.conf:3: Recipient="), std::string::npos);
    std::ofstream(dir / "badkeys") << b.recipient << "\n# x\nnot a key\n";
    const std::string e = error_of("[Domain web]\nRecipientsFile=" + (dir / "badkeys").string() + "\n");
    EXPECT_NE(e.find("x.conf:2: RecipientsFile="), std::string::npos) << e;
    EXPECT_NE(e.find((dir / "badkeys").string() + ":3"), std::string::npos) << e;
    EXPECT_NE(error_of("[Dump]\nRecipientsFile=relative\n").find("x.conf:2"), std::string::npos);
}

// The service: Recipient= in a drop-in; a crashed guest's dump written
// encrypted, the marker never in clear while it is written or after.
TEST(Service, CrashDumpEncryptedToTheConfiguredRecipient) {
    TempDir dir;
    const AgeKey key = age_keygen(dir.path());
    const fs::path host = marked_host(dir.path());
    const fs::path dumps = dir / "dumps";
    fs::create_directory(dumps);
    fs::create_directory(dir / "svc");
    ServiceProcess service(dir / "svc", host, dumps, "[Dump]\nKeepFree=0\n");
    fs::create_directories(service.config_file().string() + ".d");
    std::ofstream(service.config_file().string() + ".d/age.conf") << "[Dump]\nRecipient=" << key.recipient << "\n";
    service.start();
    ASSERT_TRUE(service.wait_ready()) << service.log();
    service.keep_reading_notifications();
    SimulatedHost(host).crash(7);
    fs::path sidecar;
    std::vector<std::string> in_clear;
    const bool done = wait_until(
        [&] {
            for (const auto& f : files_with_marker({dumps}, kMarker, std::to_string(service.pid())))
                in_clear.push_back(f);
            for (const auto& e : fs::directory_iterator(dumps))
                if (e.path().string().ends_with(".core.age.json")) sidecar = e.path();
            return !sidecar.empty();
        },
        std::chrono::seconds(120));
    ASSERT_TRUE(done) << service.log();
    const fs::path dump = sidecar.string().substr(0, sidecar.string().size() - 5);
    EXPECT_TRUE(in_clear.empty()) << in_clear.front();
    EXPECT_TRUE(files_with_marker({dumps}, kMarker).empty());
    const auto side = nlohmann::json::parse(slurp_text(sidecar));
    EXPECT_EQ(side.value("result", ""), "ok") << side.dump();
    EXPECT_EQ(side.value("reason", ""), "crash");
    EXPECT_EQ(side.value("encrypted", false), true);
    EXPECT_EQ(side.value("recipients", 0), 1);
    EXPECT_FALSE(fs::exists(dump.string() + ".dmesg.txt"));
    EXPECT_TRUE(contains(age_decrypt(key, dump, dir / "back"), kMarker));
    service.stop();
}

// The service's encrypted dump of a crashed Linux guest (the real fixture
// RAM, whose log ends in a panic): its log read from the paused guest and
// saved encrypted as NAME.core.dmesg.txt.age, what `age -d` gives is what
// `xen-dumpctl dmesg -i` prints of the dump; the panic line (guest text, the
// marker here) is in no file of the dump directory in clear and not in the
// service's journal lines; list, info and vacuum treat the .age log as the
// plain one. With ClearMetadata=panic (one-shot dumps of the same guest),
// the sidecar has the panic line and no backtrace; with
// ClearMetadata=backtrace, the frames and no panic line.
TEST(Service, EncryptedDumpsLogIsSavedEncryptedAndItsPanicLineOnlyAsAllowed) {
    FixtureHost h;
    const AgeKey key = age_keygen(h.tmp.path());
    ServiceProcess& service = h.add_service("[Dump]\nKeepFree=0\n");
    fs::create_directories(service.config_file().string() + ".d");
    std::ofstream(service.config_file().string() + ".d/age.conf") << "[Dump]\nRecipient=" << key.recipient << "\n";
    service.start();
    ASSERT_TRUE(service.wait_ready()) << service.log();
    const std::string panic(kCrashedPanicLine);
    const fs::path dump = h.crash_and_wait(kFixtureLinux, "linux");
    ASSERT_FALSE(dump.empty());
    ASSERT_TRUE(dump.string().ends_with(".core.age")) << dump;
    const fs::path dmesg = daemon::dmesg_path(dump);
    EXPECT_EQ(dmesg.filename().string(),
              dump.filename().string().substr(0, dump.filename().string().size() - 4) + ".dmesg.txt.age");
    ASSERT_TRUE(fs::exists(dmesg)) << service.log();
    EXPECT_TRUE(starts_with_age_magic(dmesg));
    EXPECT_FALSE(fs::exists(dump.string() + ".dmesg.txt"));
    const RunResult printed = run({"xen-dumpctl", "dmesg", "-i", key.identity.string(), dump.string()});
    ASSERT_EQ(printed.exit_code, 0) << printed.err;
    EXPECT_GT(printed.out.size(), 10000u);
    const std::vector<std::byte> log = age_decrypt(key, dmesg, h.tmp / "back");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(log.data()), log.size()), printed.out);
    EXPECT_TRUE(contains(log, panic));
    // The panic line in clear nowhere: not in the dump directory, not in
    // what the service logged (its journal entry's MESSAGE).
    EXPECT_EQ(files_with_marker({h.dumps}, panic), std::vector<std::string>{});
    EXPECT_EQ(service.log().find(panic), std::string::npos) << service.log();
    const json side = json::parse(slurp_text(daemon::sidecar_path(dump)));
    EXPECT_EQ(side.value("encrypted", false), true) << side.dump();
    EXPECT_EQ(side.at("guest_log").value("dmesg_file", ""), dmesg.filename().string()) << side.dump();
    EXPECT_GT(side.at("guest_log").value("records", 0), 100);
    EXPECT_TRUE(side.value("guest_panic", json()).is_null()) << side.dump();
    EXPECT_FALSE(side.contains("guest_backtrace")) << side.dump();
    // list and info: the log file counted and named as a plain one's.
    const RunResult listed = h.ctl({"list", "--json"});
    ASSERT_EQ(listed.exit_code, 0) << listed.err;
    const json entries = json::parse(listed.out);
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].value("dmesg_path", ""), dmesg.string()) << entries[0];
    EXPECT_TRUE(entries[0].value("guest_panic", json()).is_null()) << entries[0];
    const uint64_t counted = entries[0].value("bytes_on_disk", uint64_t{0});
    EXPECT_GE(counted, fs::file_size(dump) + fs::file_size(dmesg)) << entries[0];
    EXPECT_EQ(service.stop(), 0) << service.log();

    // ClearMetadata=: one-shot dumps of the crashed guest, the same record.
    for (const std::string clear : {"panic", "backtrace"}) {
        SCOPED_TRACE(clear);
        std::ofstream(h.config) << "[Dump]\nKeepFree=0\nRecipient=" << key.recipient << "\n[Domain linux]\nClearMetadata="
                                << clear << "\n";
        const RunResult r = h.dumpd("linux", {"-q"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const fs::path again = r.out.substr(0, r.out.find('\n'));
        const json s = json::parse(slurp_text(daemon::sidecar_path(again)));
        EXPECT_TRUE(fs::exists(daemon::dmesg_path(again)));
        if (clear == "panic") {
            EXPECT_EQ(s.value("guest_panic", ""), panic) << s.dump();
            EXPECT_FALSE(s.contains("guest_backtrace")) << s.dump();
        } else {
            EXPECT_TRUE(s.value("guest_panic", json()).is_null()) << s.dump();
            ASSERT_TRUE(s.contains("guest_backtrace")) << s.dump();
            EXPECT_FALSE(s.at("guest_backtrace").at("frames").empty());
        }
        fs::remove(again);
        fs::remove(daemon::sidecar_path(again));
        fs::remove(daemon::dmesg_path(again));
    }

    // vacuum removes the .age log with its dump.
    const fs::path aged = h.tmp / "aged.conf";
    std::ofstream(aged) << "[Dump]\nKeepFree=0\nMaxAge=1s\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));
    const RunResult vacuum = h.ctl({"vacuum"}, aged);
    ASSERT_EQ(vacuum.exit_code, 0) << vacuum.out << vacuum.err;
    EXPECT_FALSE(fs::exists(dump));
    EXPECT_FALSE(fs::exists(dmesg));
    EXPECT_FALSE(fs::exists(daemon::sidecar_path(dump)));
}

TEST(Config, ClearMetadataPerSection) {
    daemon::Config cfg = daemon::Config::defaults();
    daemon::apply_config_text(cfg, "[Dump]\nClearMetadata=panic\n[Domain web]\nClearMetadata=panic, backtrace\n"
                                   "[Domain db]\nClearMetadata=\n", "x.conf");
    EXPECT_EQ(cfg.clear_metadata_for("other"), (daemon::ClearMetadata{true, false}));
    EXPECT_EQ(cfg.clear_metadata_for("web"), (daemon::ClearMetadata{true, true}));
    EXPECT_EQ(cfg.clear_metadata_for("db"), (daemon::ClearMetadata{false, false}));
    EXPECT_EQ(daemon::Config::defaults().clear_metadata_for("web"), (daemon::ClearMetadata{false, false}));
    daemon::Config bad = daemon::Config::defaults();
    try {
        daemon::apply_config_text(bad, "[Dump]\nClearMetadata=panic dmesg\n", "x.conf");
        ADD_FAILURE() << "ClearMetadata=panic dmesg accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("x.conf:2: ClearMetadata=: \"dmesg\""), std::string::npos) << e.what();
    }
}

TEST(Service, ABadRecipientStopsTheStart) {
    TempDir dir;
    fs::create_directory(dir / "svc");
    ServiceProcess service(dir / "svc", marked_host(dir.path()), dir / "dumps", "[Dump]\nKeepFree=0\n\nRecipient=age1bad\n");
    service.start();
    EXPECT_FALSE(service.wait_ready(std::chrono::seconds(10)));
    EXPECT_NE(service.log().find("xen-dumpd.conf:4"), std::string::npos) << service.log();
}

}  // namespace
}  // namespace xendump::test::agewrite
