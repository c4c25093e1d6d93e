// Issue 35 item 1: a dumper killed in its pre-copy leaves log-dirty mode on;
// the service that starts next (or the next live dump of the guest) turns
// off what the dumper's record says it turned on, and nothing else: not
// another user's log-dirty, not that of a dumper still running, not that of
// a domain whose id is another guest's now.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "service_harness.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/hypervisor.hpp"
#include "xendump/logdirty_records.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using xendump::test::run;
using xendump::test::TempDir;

namespace {

constexpr uint32_t kDomid = 5;
constexpr const char* kUuid = "00000000-0000-4000-8000-000000000005";

struct Lab {
    TempDir tmp;
    fs::path host = tmp / "host";
    fs::path dumps = tmp / "dumps";

    explicit Lab(uint64_t per_page_ns = 0) {
        xendump::test::SimDomainSpec d{kDomid, "web", kUuid};
        d.type = "hvm";
        d.pages = 4096;
        d.per_page_ns = per_page_ns;
        d.writer_rate = 100;
        xendump::test::create_sim_host(host, {d});
        fs::create_directories(dumps);
        std::ofstream(tmp / "xen-dumpd.conf") << "[Dump]\nKeepFree=0\n";
    }
    bool logdirty() const {
        auto r = run({"xen-dump-sim", "info", host.string(), std::to_string(kDomid), "--json"});
        return json::parse(r.out).at("logdirty").get<bool>();
    }
    fs::path record() const { return dumps / (".xen-dumpd-logdirty-" + std::to_string(kDomid) + ".json"); }
    // A record as a dumper writes it, of process `pid`.
    void write_record(long pid, const std::string& uuid = kUuid, const std::string& start = "1") const {
        std::ofstream(record()) << json{{"domid", kDomid}, {"uuid", uuid}, {"pid", pid}, {"pid_start", start},
                                        {"device_model", false}}
                                       .dump();
    }
    std::vector<std::string> one_shot_live(const fs::path& out) const {
        return {"--config", (tmp / "xen-dumpd.conf").string(), "--host", "sim:" + host.string(), "--domain",
                std::to_string(kDomid), "--live", "--max-pause", "30000", "--dump-dir", dumps.string(), "--socket",
                (tmp / "none.sock").string(), "-o", out.string()};
    }
};

// The pid of a process that has exited.
long dead_pid() {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    ::waitpid(pid, nullptr, 0);
    return pid;
}

std::string own_start_time() {
    std::ifstream in("/proc/self/stat");
    std::string stat;
    std::getline(in, stat);
    std::istringstream fields(stat.substr(stat.rfind(')') + 1));
    std::string f;
    for (int field = 3; field <= 22 && fields >> f; ++field) {
    }
    return f;
}

}  // namespace

// The record exists exactly while log-dirty is on for the dump.
TEST(LogDirtyRecord, WrittenWhileOnRemovedAfter) {
    Lab lab;
    auto hv = xendump::open_hypervisor("sim:" + lab.host.string());
    xendump::DumpOptions o;
    o.precopy.on = true;
    o.precopy.max_pause = 30s;
    o.precopy.records = lab.dumps;
    bool seen_on = false, seen_record = false;
    bool asked = false;
    o.write.on_progress = [&](const xendump::WriteProgress&) {
        if (asked) return;  // the first report: the pass has begun
        asked = true;
        seen_on = lab.logdirty();
        seen_record = fs::exists(lab.record());
    };
    xendump::dump_domain_to_file(*hv, kDomid, lab.tmp / "a.core", o);
    EXPECT_TRUE(seen_on);
    EXPECT_TRUE(seen_record);
    EXPECT_FALSE(lab.logdirty());
    EXPECT_FALSE(fs::exists(lab.record()));
    // Failed after log-dirty went on (the output exists): off, and no record.
    EXPECT_THROW(xendump::dump_domain_to_file(*hv, kDomid, lab.tmp / "a.core", o), xendump::Error);
    EXPECT_FALSE(lab.logdirty());
    EXPECT_FALSE(fs::exists(lab.record()));
}

// Only what a record of a dumper that is gone says is turned off.
TEST(LogDirtyRecord, OnlyWhatADeadDumpersRecordSaysIsTurnedOff) {
    Lab lab;
    auto hv = xendump::open_hypervisor("sim:" + lab.host.string());
    // Log-dirty on without a record: another user's (a migration). Untouched.
    hv->enable_logdirty(kDomid);
    EXPECT_TRUE(xendump::release_stale_logdirty(*hv, lab.dumps).empty());
    EXPECT_TRUE(lab.logdirty());
    // A record of a dumper that still runs (this process): untouched.
    lab.write_record(::getpid(), kUuid, own_start_time());
    EXPECT_TRUE(xendump::release_stale_logdirty(*hv, lab.dumps).empty());
    EXPECT_TRUE(lab.logdirty());
    EXPECT_TRUE(fs::exists(lab.record()));
    // A record of another guest that had this id: removed, log-dirty untouched.
    lab.write_record(dead_pid(), "00000000-0000-4000-8000-0000000000ff");
    auto lines = xendump::release_stale_logdirty(*hv, lab.dumps);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("the domain is gone"), std::string::npos) << lines[0];
    EXPECT_TRUE(lab.logdirty());
    EXPECT_FALSE(fs::exists(lab.record()));
    // A record of this guest whose dumper is gone: off, record removed.
    lab.write_record(dead_pid());
    lines = xendump::release_stale_logdirty(*hv, lab.dumps);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("turned off log-dirty mode"), std::string::npos) << lines[0];
    EXPECT_FALSE(lab.logdirty());
    EXPECT_FALSE(fs::exists(lab.record()));
    // Not a record (hostile or damaged): kept, and said so.
    std::ofstream(lab.record()) << "{\"domid\": \"five\"}";
    lines = xendump::release_stale_logdirty(*hv, lab.dumps);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("not a log-dirty record"), std::string::npos) << lines[0];
    EXPECT_TRUE(fs::exists(lab.record()));
}

// The dumper killed in its pre-copy: log-dirty stays on (Xen keeps it);
// the next live dump of the guest turns it off first and succeeds, and so
// does the service when it starts.
TEST(LogDirtyRecord, KilledDumperIsCleanedUpByTheNextLiveDumpAndByTheService) {
    Lab lab(1'000'000);  // 1 ms a page mapped: the pass takes seconds
    for (int round = 0; round < 2; ++round) {
        SCOPED_TRACE(round == 0 ? "next live dump" : "service start");
        const fs::path work = lab.tmp / ("w" + std::to_string(round));
        fs::create_directories(work);
        xendump::test::ServiceProcess dumper(work, lab.host, lab.dumps);
        dumper.set_args(lab.one_shot_live(lab.tmp / ("killed" + std::to_string(round) + ".core")));
        dumper.start();
        ASSERT_TRUE(xendump::test::wait_until([&] { return fs::exists(lab.record()); }, 60s)) << dumper.log();
        dumper.kill_hard();
        EXPECT_TRUE(lab.logdirty()) << "Xen keeps log-dirty on after its user died";
        EXPECT_TRUE(fs::exists(lab.record()));
        if (round == 0) {
            auto r = run({"xen-dumpd", "--config", (lab.tmp / "xen-dumpd.conf").string(), "--host",
                          "sim:" + lab.host.string(), "--domain", std::to_string(kDomid), "--live", "--max-pause",
                          "30000", "--dump-dir", lab.dumps.string(), "--socket", (lab.tmp / "none.sock").string(),
                          "-o", (lab.tmp / "next.core").string()});
            ASSERT_EQ(r.exit_code, 0) << r.err;
            EXPECT_NE(r.err.find("turned off log-dirty mode"), std::string::npos) << r.err;
            EXPECT_TRUE(fs::exists(lab.tmp / "next.core"));
        } else {
            fs::create_directories(lab.tmp / "service");
            xendump::test::ServiceProcess service(lab.tmp / "service", lab.host, lab.dumps);
            service.start();
            ASSERT_TRUE(service.wait_ready()) << service.log();
            EXPECT_NE(service.log().find("turned off log-dirty mode"), std::string::npos) << service.log();
            EXPECT_EQ(service.stop(), 0) << service.log();
        }
        EXPECT_FALSE(lab.logdirty());
        EXPECT_FALSE(fs::exists(lab.record()));
    }
}
