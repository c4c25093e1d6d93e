// The programs on names, directories and configuration files: `xen-dumpd
// --domain` (a one-shot dump, by itself when no service runs) and the service
// against a simulated host, and `xen-dumpctl list` on what they wrote. Only
// the programs are used, so these run against any version of them.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "service_harness.hpp"
#include "sidecar.hpp"
#include "test_support.hpp"

using xendump::test::TempDir;

namespace {

class OneShot : public ::testing::Test {
protected:
    void SetUp() override {
        xendump::test::create_sim_host(tmp_ / "host", {{1, "web01", "00000000-0000-4000-8000-000000000001", 64},
                                                       {2, ".hidden", "00000000-0000-4000-8000-000000000002", 64},
                                                       {3, "evil\n\x1b[31mred", "00000000-0000-4000-8000-000000000003", 64}});
        std::ofstream(config_) << "[Dump]\n";
        std::filesystem::create_directory(dumps_);
    }
    xendump::test::RunResult dump(std::vector<std::string> extra, const std::string& domain = "1") {
        // A socket nobody listens on: the command dumps by itself.
        std::vector<std::string> argv{"xen-dumpd", "--domain", domain, "--host", "sim:" + (tmp_ / "host").string(),
                                      "--socket", (tmp_ / "no.sock").string(), "-q"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return xendump::test::run(argv);
    }
    TempDir tmp_;
    std::filesystem::path config_ = tmp_ / "xen-dumpd.conf";
    std::filesystem::path dumps_ = tmp_ / "dumps";
};

TEST_F(OneShot, WritesIntoAnExistingDumpDir) {
    auto r = dump({"--config", config_.string(), "--dump-dir", dumps_.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(std::filesystem::path(r.out.substr(0, r.out.find('\n'))).parent_path(), dumps_) << r.out;
}

TEST_F(OneShot, NamedConfigFileThatIsMissingFails) {
    auto missing = tmp_ / "mistyped.conf";
    auto r = dump({"--config", missing.string(), "--dump-dir", dumps_.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find(missing.string()), std::string::npos) << r.err;
    EXPECT_TRUE(std::filesystem::is_empty(dumps_)) << "dumped with the defaults";
}

TEST_F(OneShot, ConfigFileThatIsADirectoryFails) {
    auto r = dump({"--config", tmp_.path().string(), "--dump-dir", dumps_.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("directory"), std::string::npos) << r.err;
    EXPECT_TRUE(std::filesystem::is_empty(dumps_)) << "dumped with the defaults";
}

TEST_F(OneShot, MistypedDumpDirIsNotCreated) {
    auto mistyped = tmp_ / "nonexistent" / "dir";
    auto r = dump({"--config", config_.string(), "--dump-dir", mistyped.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find(mistyped.string()), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp_ / "nonexistent")) << "created a mistyped directory";
}

TEST_F(OneShot, OutputIntoMistypedDirectoryIsNotCreated) {
    auto mistyped = tmp_ / "nonexistent" / "web.core";
    auto r = dump({"--config", config_.string(), "-o", mistyped.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp_ / "nonexistent")) << "created a mistyped directory";
}

TEST_F(OneShot, HostileNamesAreDumpedVisiblyAndListedEscaped) {
    for (const char* domid : {"2", "3"}) {
        auto r = dump({"--config", config_.string(), "--dump-dir", dumps_.string()}, domid);
        ASSERT_EQ(r.exit_code, 0) << domid << ": " << r.err;
        std::string path = r.out.substr(0, r.out.find('\n'));
        EXPECT_EQ(std::filesystem::path(path).parent_path(), dumps_) << r.out;
        EXPECT_FALSE(std::filesystem::path(path).filename().string().starts_with(".")) << path;
        EXPECT_EQ(path.find('\x1b'), std::string::npos) << path;
    }
    auto list = xendump::test::run(
        {"xen-dumpctl", "list", "--json", "--config", config_.string(), "--dump-dir", dumps_.string()});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    auto j = nlohmann::json::parse(list.out, nullptr, false);
    ASSERT_TRUE(j.is_array()) << list.out;
    ASSERT_EQ(j.size(), 2u) << "a dump is hidden from list (and from MaxUse): " << list.out;
    EXPECT_EQ(j[0]["domain"].get<std::string>() + j[1]["domain"].get<std::string>(), ".hiddenevil\n\x1b[31mred");
    auto text = xendump::test::run({"xen-dumpctl", "list", "--config", config_.string(), "--dump-dir", dumps_.string()});
    EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("evil\\n\\x1b[31mred"), std::string::npos) << text.out;
}

// The service, with `config_text` as its configuration file.
struct Service {
    TempDir tmp;
    std::filesystem::path host = tmp / "host";
    std::filesystem::path dumps = tmp / "dumps";
    std::unique_ptr<xendump::test::ServiceProcess> service;

    explicit Service(const std::string& config_text, const std::string& name = "web01", uint64_t per_page_ns = 0) {
        xendump::test::create_sim_host(host, {{7, name, "00000000-0000-4000-8000-000000000007", 2048, per_page_ns}});
        service = std::make_unique<xendump::test::ServiceProcess>(tmp.path(), host, dumps, config_text);
    }
    int max_parallel() {
        auto r = xendump::test::run({"xen-dumpctl", "status", "--json", "--socket", service->socket().string()});
        auto j = nlohmann::json::parse(r.out, nullptr, false);
        return j.is_object() ? j.value("max_parallel", -1) : -1;
    }
};

TEST(ServiceConfig, SighupWithADirectoryAsConfigFileKeepsTheRunningOne) {
    Service s("[Dump]\nMaxParallel=2\n");
    s.service->start();
    ASSERT_TRUE(s.service->wait_ready()) << s.service->log();
    ASSERT_EQ(s.max_parallel(), 2);
    std::filesystem::remove(s.service->config_file());
    std::filesystem::create_directory(s.service->config_file());
    s.service->signal(SIGHUP);
    ASSERT_TRUE(xendump::test::wait_until([&] {
        return s.service->log().find("keeping the old configuration") != std::string::npos;
    })) << s.service->log();
    EXPECT_NE(s.service->log().find("directory"), std::string::npos) << s.service->log();
    EXPECT_EQ(s.max_parallel(), 2) << "the defaults were loaded from a directory";
}

TEST(ServiceConfig, NamedConfigFileThatIsMissingStopsTheStart) {
    Service s("");
    std::filesystem::remove(s.service->config_file());
    s.service->start();
    EXPECT_FALSE(s.service->wait_ready(std::chrono::seconds(5))) << "started with the defaults";
    EXPECT_NE(s.service->log().find(s.service->config_file().string()), std::string::npos) << s.service->log();
}

TEST(ServiceConfig, ExistingDumpDirIsMadePrivate) {
    Service s("[Dump]\n");
    std::filesystem::create_directory(s.dumps);
    ASSERT_EQ(::chmod(s.dumps.c_str(), 0755), 0);
    s.service->start();
    ASSERT_TRUE(s.service->wait_ready()) << s.service->log();
    struct stat st {};
    ASSERT_EQ(::stat(s.dumps.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST(ServiceConfig, StatusEscapesTheNameOfARunningDump) {
    Service s("[Dump]\n", "evil\n\x1b[31mred", 1000000);  // 1 ms a page: the dump runs for a while
    s.service->start();
    ASSERT_TRUE(s.service->wait_ready()) << s.service->log();
    xendump::test::sim({"crash", s.host.string(), "7"});
    xendump::test::RunResult text;
    ASSERT_TRUE(xendump::test::wait_until([&] {
        text = xendump::test::run({"xen-dumpctl", "status", "--socket", s.service->socket().string()});
        // "No dumps running or queued." until the service has seen the crash.
        return text.out.find("running") != std::string::npos &&
               text.out.find("No dumps running") == std::string::npos;
    })) << text.out << text.err << s.service->log();
    EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("evil\\n\\x1b[31mred"), std::string::npos) << text.out;
    // The log line of the crash, too.
    EXPECT_EQ(s.service->log().find('\x1b'), std::string::npos) << s.service->log();
    EXPECT_NE(s.service->log().find("evil\\n\\x1b[31mred"), std::string::npos) << s.service->log();
}

// The service over a simulated host of one HVM guest of 2048 pages (domain
// 7, web01) whose calls take `per_call_us` each, started and ready.
std::unique_ptr<xendump::test::ServiceProcess> hvm_service(const TempDir& tmp, uint64_t per_call_us,
                                                           uint64_t writer_rate = 0) {
    const auto host = tmp / "host", dumps = tmp / "dumps";
    xendump::test::SimDomainSpec guest{7, "web01", "00000000-0000-4000-8000-000000000007", 2048};
    guest.type = "hvm";
    guest.per_call_us = per_call_us;
    guest.writer_rate = writer_rate;
    xendump::test::create_sim_host(host, {guest});
    auto service = std::make_unique<xendump::test::ServiceProcess>(tmp.path(), host, dumps, "[Dump]\n");
    service->start();
    return service;
}

// Issue 36: an HVM dump's discovery (its page types asked, a while on a large
// guest) shows in status before the first byte: "finding pages N%". Here
// each mapping or page-type call takes 1.5 s: two page-type calls of 1024
// gfns, then two mapping calls of 1024 pages.
TEST(ServiceProgress, StatusShowsAnHvmDumpFindingItsPages) {
    TempDir tmp;
    auto running = hvm_service(tmp, 1500000);
    auto& service = *running;
    ASSERT_TRUE(service.wait_ready()) << service.log();
    xendump::test::sim({"crash", (tmp / "host").string(), "7"});
    xendump::test::RunResult text, json;
    ASSERT_TRUE(xendump::test::wait_until([&] {
        text = xendump::test::run({"xen-dumpctl", "status", "--socket", service.socket().string()});
        return text.out.find("finding pages") != std::string::npos;
    })) << text.out << text.err << service.log();
    EXPECT_NE(text.out.find("running"), std::string::npos) << text.out;
    json = xendump::test::run({"xen-dumpctl", "status", "--json", "--socket", service.socket().string()});
    auto j = nlohmann::json::parse(json.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << json.out;
    ASSERT_EQ(j["jobs"].size(), 1u) << json.out;
    const auto& job = j["jobs"][0];
    if (job.value("finding_pages", false)) {  // else the pass began in between
        EXPECT_EQ(job.value("pfns_total", uint64_t{0}), 2048u) << json.out;
        EXPECT_LE(job.value("pfns_done", uint64_t{0}), 2048u) << json.out;
        EXPECT_EQ(job.value("bytes_done", uint64_t{1}), 0u) << json.out;
    }
    // Then the pass's bytes.
    ASSERT_TRUE(xendump::test::wait_until([&] {
        text = xendump::test::run({"xen-dumpctl", "status", "--socket", service.socket().string()});
        return text.out.find("% of ") != std::string::npos || text.out.find("No dumps running") != std::string::npos;
    })) << text.out << text.err << service.log();
}

// Issue 35: a live dump the service runs shows its pre-copy rounds in
// status after the pass ("pre-copy round N: M pages dirtied", then the
// paused last round; live_round, dirty_pages, live_final in --json). Each
// mapping call takes 0.3 s, so each round lasts a while.
TEST(ServiceProgress, StatusShowsTheRoundsOfALiveDump) {
    TempDir tmp;
    auto running = hvm_service(tmp, 300000, 250);
    auto& service = *running;
    ASSERT_TRUE(service.wait_ready()) << service.log();
    auto conn = xendump::daemon::connect_control(service.socket());
    ASSERT_TRUE(conn);
    // Never fits the pause target: rounds until they stop, then the paused one.
    conn->send({{"command", "dump"},
                {"domain", "web01"},
                {"precopy", {{"max_pause_us", 1}, {"max_rounds", 3}, {"leave_paused", false}}}});
    xendump::test::RunResult text, json;
    ASSERT_TRUE(xendump::test::wait_until([&] {
        text = xendump::test::run({"xen-dumpctl", "status", "--socket", service.socket().string()});
        return text.out.find("pre-copy round") != std::string::npos;
    }, std::chrono::seconds(60))) << text.out << text.err << service.log();
    EXPECT_NE(text.out.find("pages dirtied, copying again"), std::string::npos) << text.out;
    json = xendump::test::run({"xen-dumpctl", "status", "--json", "--socket", service.socket().string()});
    auto j = nlohmann::json::parse(json.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << json.out;
    ASSERT_EQ(j["jobs"].size(), 1u) << json.out;
    const auto& job = j["jobs"][0];
    EXPECT_GE(job.value("live_round", 0u), 1u) << json.out;
    EXPECT_TRUE(job.contains("dirty_pages")) << json.out;
    // The requester's events carry the rounds too, the last one paused, and
    // the dump ends well.
    unsigned rounds = 0;
    bool final = false;
    std::string result;
    while (result.empty()) {
        auto m = conn->receive(std::chrono::seconds(60));
        ASSERT_TRUE(m) << service.log();
        if (m->value("event", "") == "progress" && m->contains("live_round")) {
            rounds = std::max(rounds, m->value("live_round", 0u));
            final = final || m->value("live_final", false);
        }
        if (m->value("event", "") == "finished") result = m->value("result", "");
    }
    EXPECT_EQ(result, "ok") << service.log();
    // At most three rounds while it runs (fewer when the dirty pages stop
    // shrinking), then the paused one.
    EXPECT_GE(rounds, 2u);
    EXPECT_LE(rounds, 4u);
    EXPECT_TRUE(final);
}

}  // namespace

namespace {

// What `xen-dumpctl info --json` says of a dump: its "live" ("precopy",
// "inconsistent", or null for a paused dump).
std::string live_of(const std::string& dump) {
    const auto info = xendump::test::run({"xen-dumpctl", "info", "--json", dump});
    const auto j = nlohmann::json::parse(info.out, nullptr, false);
    if (!j.is_object()) return "(no info: " + info.err + ")";
    return j.contains("live") && j["live"].is_string() ? j["live"].get<std::string>() : "paused";
}

}  // namespace

// Issue 35 item 3: the service's on-demand dumps take Live= (with MaxPause=
// and LiveRounds=) when the request does not say; --live=no, --live and
// --live=inconsistent win; a crash dump is never live.
TEST(ServiceLive, RequestsTakeTheConfiguredLiveAndCrashDumpsNever) {
    for (const std::string live : {"consistent", "inconsistent", "no"}) {
        SCOPED_TRACE("Live=" + live);
        TempDir tmp;
        const auto host = tmp / "host", dumps = tmp / "dumps";
        xendump::test::SimDomainSpec guest{7, "web01", "00000000-0000-4000-8000-000000000007", 2048};
        guest.type = "hvm";
        guest.writer_rate = 200;
        xendump::test::create_sim_host(host, {guest});
        xendump::test::ServiceProcess service(tmp.path(), host, dumps,
                                              "[Dump]\nLive=" + live + "\nMaxPause=50ms\nLiveRounds=2\n");
        service.start();
        ASSERT_TRUE(service.wait_ready()) << service.log();
        auto request = [&](std::vector<std::string> extra) {
            std::vector<std::string> argv{"xen-dumpd", "--domain", "web01", "--quiet"};
            for (const auto& a : service.common_args()) argv.push_back(a);
            argv.insert(argv.end(), extra.begin(), extra.end());
            const auto r = xendump::test::run(argv);
            EXPECT_EQ(r.exit_code, 0) << r.err << service.log();
            return r.out.substr(0, r.out.find('\n'));
        };
        const std::string configured = live == "consistent" ? "precopy" : live == "no" ? "paused" : live;
        EXPECT_EQ(live_of(request({})), configured);
        EXPECT_EQ(live_of(request({"--live=no"})), "paused");
        EXPECT_EQ(live_of(request({"--live"})), "precopy");
        EXPECT_EQ(live_of(request({"--live=inconsistent"})), "inconsistent");
        // The guest crashes: its dump is of the stopped guest.
        // Its sidecar comes after the dump.
        const auto before = xendump::test::sidecars_in(dumps).size();
        xendump::test::sim({"crash", host.string(), "7"});
        ASSERT_TRUE(xendump::test::wait_until([&] { return xendump::test::sidecars_in(dumps).size() == before + 1; }))
            << service.log();
        for (const auto& d : xendump::test::dumps_in(dumps)) {
            if (xendump::daemon::read_sidecar(xendump::daemon::sidecar_path(d)).reason == "crash") {
                EXPECT_EQ(live_of(d.string()), "paused") << d;
            }
        }
    }
}
