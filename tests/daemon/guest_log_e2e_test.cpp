// Issue 20 item 3, end to end: xen-dumpd dumps a crashed HVM guest whose
// memory is the real fixture RAM (its last log record made a panic,
// tests/kernel/guest_ram.hpp) and a guest without a kernel (pattern memory),
// and the record of each dump carries the guest kernel's log: DUMP.dmesg.txt
// beside the dump (what `xen-dumpctl dmesg` prints), the panic line in the
// sidecar, the journal entry and `xen-dumpctl list`; a guest without a kernel
// gets its dump and an "error" in the sidecar; retention removes the
// .dmesg.txt with its dump.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "crash_signature.hpp"
#include "dump_dir.hpp"
#include "dump_job.hpp"
#include "fixture_host.hpp"
#include "guest_log.hpp"
#include "guest_ram.hpp"
#include "journal_log.hpp"
#include "service_harness.hpp"
#include "sidecar.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint32_t kLinux = kFixtureLinux, kPattern = kFixturePattern;

unsigned mode_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
}

TEST(ServiceGuestLog, CrashDumpsRecordTheGuestsLogAndPanicLine) {
    FixtureHost h;
    h.add_service("[Dump]\nKeepFree=0\n").start();
    ASSERT_TRUE(h.service->wait_ready()) << "service not ready: " << h.service->log();

    // The crashed Linux guest.
    const fs::path dump = h.crash_and_wait(kLinux, "linux");
    ASSERT_FALSE(dump.empty());
    const fs::path dmesg = daemon::dmesg_path(dump);
    ASSERT_TRUE(fs::exists(dmesg)) << h.service->log();
    EXPECT_EQ(dmesg.filename().string(), dump.filename().string() + ".dmesg.txt");
    EXPECT_EQ(mode_of(dmesg), mode_of(dump));
    RunResult printed = run({"xen-dumpctl", "dmesg", dump.string()});
    ASSERT_EQ(printed.exit_code, 0) << printed.err;
    EXPECT_GT(printed.out.size(), 10000u);
    EXPECT_EQ(slurp_text(dmesg), printed.out);

    const daemon::Sidecar sc = daemon::read_sidecar(daemon::sidecar_path(dump));
    EXPECT_EQ(sc.result, daemon::DumpOutcome::ok);
    ASSERT_TRUE(sc.guest_panic.has_value());
    EXPECT_EQ(*sc.guest_panic, kCrashedPanicLine);
    ASSERT_TRUE(sc.guest_log.has_value());
    ASSERT_TRUE(sc.guest_log->records.has_value());
    EXPECT_GT(*sc.guest_log->records, 100u);
    EXPECT_FALSE(sc.guest_log->partial);
    EXPECT_EQ(sc.guest_log->dmesg_file, dmesg.filename().string());
    EXPECT_EQ(sc.guest_log->error, "");
    // The sidecar's JSON as written.
    const json raw = json::parse(slurp_text(daemon::sidecar_path(dump)));
    EXPECT_EQ(raw.at("guest_panic"), kCrashedPanicLine);
    EXPECT_EQ(raw.at("guest_log").at("partial"), false);

    // The journal entry: the service's line (stderr here) is the entry's
    // MESSAGE, with the panic line; its fields carry GUEST_PANIC=.
    const std::string message = daemon::dump_journal_message(sc, dump);
    EXPECT_NE(message.find(std::string(kCrashedPanicLine)), std::string::npos) << message;
    EXPECT_NE(h.service->log().find(daemon::stderr_line(daemon::LogLevel::notice, message)), std::string::npos)
        << h.service->log();
    const auto items = daemon::journal_items(daemon::LogLevel::notice, message, daemon::dump_journal_fields(sc, dump),
                                             daemon::kMessageDumpWritten);
    EXPECT_NE(std::find(items.begin(), items.end(), "GUEST_PANIC=" + std::string(kCrashedPanicLine)), items.end());
    EXPECT_NE(std::find(items.begin(), items.end(), "GUEST_DMESG_PATH=" + dmesg.string()), items.end());
    // The vcpu that reported the crash (the guest's only one) and its top
    // frames, in the sidecar, GUEST_BACKTRACE= and the message.
    ASSERT_TRUE(sc.guest_backtrace.has_value()) << slurp_text(daemon::sidecar_path(dump));
    EXPECT_EQ(sc.guest_backtrace->vcpu, 0u);
    EXPECT_FALSE(sc.guest_backtrace->frames.empty());
    EXPECT_LE(sc.guest_backtrace->frames.size(), daemon::kGuestBacktraceFrames + 1);
    EXPECT_TRUE(raw.at("guest_backtrace").at("frames").is_array());
    EXPECT_NE(std::find(items.begin(), items.end(), "GUEST_BACKTRACE=" + daemon::guest_backtrace_line(*sc.guest_backtrace)),
              items.end());
    EXPECT_NE(message.find("; backtrace: vcpu 0 ("), std::string::npos) << message;
    // Issue 34 item 5: the crash's signature, in the sidecar and CRASH_SIGNATURE=.
    const auto signature = daemon::crash_signature(sc);
    ASSERT_TRUE(signature.has_value());
    EXPECT_EQ(raw.value("crash_signature", ""), *signature);
    EXPECT_NE(std::find(items.begin(), items.end(), "CRASH_SIGNATURE=" + *signature), items.end());

    // A guest without a kernel: its dump, no .dmesg.txt, the error recorded.
    const fs::path plain = h.crash_and_wait(kPattern, "pattern");
    ASSERT_FALSE(plain.empty());
    EXPECT_TRUE(fs::exists(plain));
    EXPECT_FALSE(fs::exists(daemon::dmesg_path(plain)));
    const daemon::Sidecar pc = daemon::read_sidecar(daemon::sidecar_path(plain));
    EXPECT_EQ(pc.result, daemon::DumpOutcome::ok);
    EXPECT_FALSE(pc.guest_panic.has_value());
    ASSERT_TRUE(pc.guest_log.has_value());
    EXPECT_FALSE(pc.guest_log->records.has_value());
    EXPECT_NE(pc.guest_log->error.find("no VMCOREINFO"), std::string::npos) << pc.guest_log->error;
    EXPECT_NE(h.service->log().find("no guest kernel log: no VMCOREINFO"), std::string::npos) << h.service->log();

    // xen-dumpctl list: the panic, as a column and in JSON; info quotes it too.
    RunResult list = h.ctl({"list"});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    EXPECT_NE(list.out.find("PANIC"), std::string::npos) << list.out;
    EXPECT_NE(list.out.find("  Kernel panic - not syncing: testing\n"), std::string::npos) << list.out;
    RunResult listed = h.ctl({"list", "--json"});
    ASSERT_EQ(listed.exit_code, 0) << listed.err;
    const json j = json::parse(listed.out);
    ASSERT_EQ(j.size(), 2u);
    for (const auto& e : j) {
        const bool is_linux = e.at("domain") == "linux";
        EXPECT_EQ(e.at("guest_panic"), is_linux ? json(kCrashedPanicLine) : json(nullptr)) << e;
        EXPECT_EQ(e.at("dmesg_path"), is_linux ? json(dmesg.string()) : json(nullptr)) << e;
    }
    RunResult info = run({"xen-dumpctl", "info", dump.string()});
    EXPECT_NE(info.out.find("\nCrash report: " + std::string(kCrashedPanicLine) + "\n"), std::string::npos)
        << info.out;

    // Retention: the .dmesg.txt goes with its dump.
    EXPECT_EQ(h.service->stop(SIGTERM), 0) << h.service->log();
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // MaxAge=1s: older than 1 s
    const fs::path aged = h.tmp / "aged.conf";
    std::ofstream(aged) << "[Dump]\nKeepFree=0\nMaxAge=1s\n";
    RunResult vacuum = h.ctl({"vacuum"}, aged);
    ASSERT_EQ(vacuum.exit_code, 0) << vacuum.out << vacuum.err;
    EXPECT_FALSE(fs::exists(dump));
    EXPECT_FALSE(fs::exists(dmesg));
    EXPECT_FALSE(fs::exists(daemon::sidecar_path(dump)));
    EXPECT_FALSE(fs::exists(plain));
    // Nothing of either record is left (the service's crash book stays).
    for (const auto& e : fs::directory_iterator(h.dumps))
        EXPECT_EQ(e.path().filename(), ".xen-dumpd-state.json") << e.path();
}

// Issue 32: a hostile guest, end to end through the service. Its kernel
// release is an absolute path ("/tmp/abcdefghi", as long as the fixture's),
// its panic line holds ESC[2J, \r, \v, \f, a right-to-left override and a C1
// CSI, its name a right-to-left override, ESC and \r. Every human-readable
// output shows them escaped by the one rule (escape_text): DUMP.dmesg.txt,
// dmesg, the panic in the sidecar, list, info, the journal MESSAGE and the
// service's log; JSON keeps the raw name. The release is recorded as
// KERNEL_UNTRUSTED= (never KERNEL=), nowhere in the sidecar or the journal
// fields, info marks it untrusted and debug refuses it without --vmlinux.
bool has_raw_control(const std::string& text) {
    for (std::string_view c : {"\x1b", "\r", "\v", "\f", "\xe2\x80\xae", "\xc2\x9b"})
        if (text.find(c) != std::string::npos) return true;
    return false;
}

TEST(ServiceGuestLog, AHostileGuestsTextIsEscapedAndItsReleaseUntrusted) {
    const std::string release = "/tmp/abcdefghi";
    const std::string name = "ev\xe2\x80\xaeil\x1b[2J\r";
    const std::string shown_name = "ev\\xe2\\x80\\xaeil\\x1b[2J\\r";
    FixtureHost h(hostile_guest_ram(release), name);
    h.add_service("[Dump]\nKeepFree=0\n").start();
    ASSERT_TRUE(h.service->wait_ready()) << "service not ready: " << h.service->log();
    const fs::path dump = h.crash_and_wait(kLinux, daemon::encode_file_name_part(name));
    ASSERT_FALSE(dump.empty());

    const DumpReader reader = DumpReader::open(dump);
    EXPECT_FALSE(reader.domain().contains(keys::kKernel));
    EXPECT_EQ(reader.domain().get(keys::kKernelUntrusted), release);

    const std::string saved = slurp_text(daemon::dmesg_path(dump));
    EXPECT_NE(saved.find("\n" + std::string(kHostilePanicLine) + "\n"), std::string::npos);
    EXPECT_FALSE(has_raw_control(saved));
    RunResult printed = run({"xen-dumpctl", "dmesg", dump.string()});
    EXPECT_EQ(printed.out, saved);

    const std::string sidecar_text = slurp_text(daemon::sidecar_path(dump));
    const json raw = json::parse(sidecar_text);
    EXPECT_EQ(raw.at("domain"), name);  // JSON: the raw name
    EXPECT_EQ(raw.at("guest_panic"), kHostilePanicLine);
    EXPECT_EQ(sidecar_text.find(release), std::string::npos) << sidecar_text;

    const daemon::Sidecar sc = daemon::read_sidecar(daemon::sidecar_path(dump));
    const std::string message = daemon::dump_journal_message(sc, dump);
    const auto items = daemon::journal_items(daemon::LogLevel::notice, message, daemon::dump_journal_fields(sc, dump),
                                             daemon::kMessageDumpWritten);
    ASSERT_TRUE(items.at(0).starts_with("MESSAGE=dump of " + shown_name + " (domain ")) << items.at(0);
    EXPECT_FALSE(has_raw_control(items.at(0))) << items.at(0);
    // The panic line escaped once, as dmesg prints it (not escaped again).
    EXPECT_NE(items.at(0).find("; the guest's log: " + std::string(kHostilePanicLine) + ";"), std::string::npos)
        << items.at(0);
    EXPECT_NE(std::find(items.begin(), items.end(), "GUEST_PANIC=" + std::string(kHostilePanicLine)), items.end());
    for (const auto& item : items) {
        EXPECT_EQ(item.find(release), std::string::npos) << item;
        EXPECT_FALSE(item.starts_with("KERNEL")) << item;
    }
    EXPECT_FALSE(has_raw_control(h.service->log())) << h.service->log();
    EXPECT_NE(h.service->log().find(shown_name), std::string::npos) << h.service->log();

    RunResult list = h.ctl({"list"});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    EXPECT_FALSE(has_raw_control(list.out)) << list.out;
    EXPECT_NE(list.out.find(shown_name), std::string::npos) << list.out;
    EXPECT_NE(list.out.find("Kernel panic - not syncing: \\x1b[2J\\r\\x0b\\x0c\\xe2\\x80\\xae"), std::string::npos)
        << list.out;
    RunResult listed = h.ctl({"list", "--json"});
    ASSERT_EQ(listed.exit_code, 0) << listed.err;
    bool found = false;
    for (const auto& e : json::parse(listed.out)) found = found || e.at("domain") == name;
    EXPECT_TRUE(found) << listed.out;

    RunResult info = h.ctl({"info", "DOMID=" + std::to_string(kLinux)});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    EXPECT_FALSE(has_raw_control(info.out)) << info.out;
    EXPECT_NE(info.out.find(" (" + shown_name + ")\n"), std::string::npos) << info.out;
    EXPECT_NE(info.out.find(release + " (untrusted)"), std::string::npos) << info.out;
    RunResult debug = h.ctl({"debug", "--print-command", "DOMID=" + std::to_string(kLinux)});
    EXPECT_EQ(debug.exit_code, 1) << debug.out;
    EXPECT_NE(debug.err.find("--vmlinux"), std::string::npos) << debug.err;
    EXPECT_EQ(debug.err.find("linux-image-"), std::string::npos) << debug.err;
}

}  // namespace
}  // namespace xendump::test
