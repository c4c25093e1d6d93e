// xen-dumpd as a real process against a simulated host.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "control_protocol.hpp"
#include "service_harness.hpp"
#include "sidecar.hpp"
#include "xendump/reader.hpp"

using namespace xendump::test;
namespace fs = std::filesystem;

namespace {

const std::string kUuid1 = "11111111-1111-4111-8111-111111111111";
const std::string kUuid2 = "22222222-2222-4222-8222-222222222222";
const std::string kUuid3 = "33333333-3333-4333-8333-333333333333";

struct Fixture {
    TempDir tmp;
    fs::path host = tmp / "host";
    fs::path dumps = tmp / "dumps";
    std::unique_ptr<ServiceProcess> service;

    explicit Fixture(const std::vector<SimDomainSpec>& domains, const std::string& config = {}) {
        create_sim_host(host, domains);
        service = std::make_unique<ServiceProcess>(tmp.path(), host, dumps, config);
        service->start();
        if (!service->wait_ready()) throw std::runtime_error("service not ready: " + service->log());
    }
    void expect_verifies(const fs::path& p) {
        auto reader = xendump::DumpReader::open(p);
        EXPECT_TRUE(reader.verify().empty()) << p;
    }
    RunResult ctl(std::vector<std::string> args) { return run_ctl(*service, std::move(args)); }
    xendump::daemon::Sidecar sidecar_of(const fs::path& dump) {
        return xendump::daemon::read_sidecar(xendump::daemon::sidecar_path(dump));
    }
};

size_t index_of(const std::vector<std::string>& v, const std::string& prefix) {
    for (size_t i = 0; i < v.size(); ++i)
        if (v[i].starts_with(prefix)) return i;
    return SIZE_MAX;
}

}  // namespace

TEST(ServiceE2E, CrashIsDumpedVerifiedListedAndNotifiesInOrder) {
    Fixture f({{7, "web01", kUuid1}, {8, "db01", kUuid2}});
    sim({"crash", f.host.string(), "7"});
    ASSERT_TRUE(wait_until([&] { return dumps_in(f.dumps).size() == 1 && sidecars_in(f.dumps).size() == 1; }))
        << f.service->log();
    auto dump = dumps_in(f.dumps).at(0);
    EXPECT_TRUE(dump.filename().string().starts_with("web01-7-")) << dump;
    struct stat st {};
    ASSERT_EQ(::stat(dump.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(::stat(f.dumps.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    f.expect_verifies(dump);
    auto sc = f.sidecar_of(dump);
    EXPECT_EQ(sc.result, xendump::daemon::DumpOutcome::ok);
    EXPECT_EQ(sc.reason, "crash");
    EXPECT_EQ(sc.domid, 7u);
    EXPECT_EQ(sc.uuid, kUuid1);
    EXPECT_GT(sc.bytes_on_disk, 0u);

    auto list = f.ctl({"list", "--json"});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    auto j = nlohmann::json::parse(list.out);
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0]["domain"], "web01");
    EXPECT_EQ(j[0]["result"], "ok");
    EXPECT_EQ(j[0]["path"], dump.string());
    auto text = f.ctl({"list"});
    EXPECT_NE(text.out.find("web01"), std::string::npos) << text.out;

    EXPECT_EQ(f.service->stop(SIGTERM), 0) << f.service->log();
    auto n = f.service->notifications();
    size_t ready = index_of(n, "READY=1"), status = index_of(n, "STATUS="), stopping = index_of(n, "STOPPING=1");
    ASSERT_NE(ready, SIZE_MAX);
    ASSERT_NE(stopping, SIZE_MAX);
    ASSERT_NE(status, SIZE_MAX);
    EXPECT_LT(ready, stopping);
    // A STATUS= after READY=1 (the work in progress or the idle line).
    bool status_after_ready = false;
    for (size_t i = ready + 1; i < stopping; ++i) status_after_ready |= n[i].starts_with("STATUS=");
    EXPECT_TRUE(status_after_ready);
    // Same crash, restarted service: not dumped again.
    f.service->start();
    ASSERT_TRUE(f.service->wait_ready());
    std::this_thread::sleep_for(std::chrono::seconds(1));
    EXPECT_EQ(dumps_in(f.dumps).size(), 1u);
}

TEST(ServiceE2E, TwoCrashesTogetherBothDumped) {
    Fixture f({{7, "web01", kUuid1}, {8, "db01", kUuid2}, {9, "idle", kUuid3}});
    sim({"crash", f.host.string(), "7"});
    sim({"crash", f.host.string(), "8"});
    ASSERT_TRUE(wait_until([&] { return sidecars_in(f.dumps).size() == 2; })) << f.service->log();
    ASSERT_EQ(dumps_in(f.dumps).size(), 2u);
    for (const auto& d : dumps_in(f.dumps)) f.expect_verifies(d);
}

TEST(ServiceE2E, CrashDuringRequestIsQueuedNotLost) {
    // A slow guest keeps the request running while another guest crashes.
    Fixture f({{7, "slow", kUuid1, 2048, 1000000}, {8, "crashy", kUuid2}});
    std::vector<std::string> argv{"xen-dumpd", "--domain", "slow", "--quiet"};
    auto common = f.service->common_args();
    argv.insert(argv.end(), common.begin(), common.end());
    RunResult request;
    std::thread client([&] { request = run(argv); });
    ASSERT_TRUE(wait_until([&] {
        auto s = f.ctl({"status", "--json"});
        return s.out.find("\"running\"") != std::string::npos;
    }));
    sim({"crash", f.host.string(), "8"});
    auto s = f.ctl({"status"});
    client.join();
    EXPECT_EQ(request.exit_code, 0) << request.err << f.service->log();
    EXPECT_TRUE(request.out.find("slow-7-") != std::string::npos) << request.out;
    ASSERT_TRUE(wait_until([&] { return dumps_in(f.dumps).size() == 2; })) << f.service->log();
    for (const auto& d : dumps_in(f.dumps)) f.expect_verifies(d);
    EXPECT_EQ(f.sidecar_of(fs::path(request.out.substr(0, request.out.find('\n')))).reason, "request");
}

TEST(ServiceE2E, NonRootRequestRefused) {
    Fixture f({{7, "web01", kUuid1}});
    // Let anyone reach the socket: only SO_PEERCRED may refuse.
    ::chmod(f.service->socket().parent_path().c_str(), 0755);
    ::chmod(f.service->socket().c_str(), 0666);
    ::chmod(f.tmp.path().c_str(), 0755);
    int pipefd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::close(pipefd[0]);
        std::string answer = "no answer";
        if (::setgid(65534) == 0 && ::setuid(65534) == 0) {
            try {
                auto reply = xendump::daemon::control_request(f.service->socket(),
                                                              {{"command", "dump"}, {"domain", "web01"}});
                answer = reply.dump();
            } catch (const std::exception& e) {
                answer = std::string("exception: ") + e.what();
            }
        } else {
            answer = "cannot setuid";
        }
        (void)!::write(pipefd[1], answer.data(), answer.size());
        ::_exit(0);
    }
    ::close(pipefd[1]);
    std::string answer;
    char buf[1024];
    ssize_t n;
    while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) answer.append(buf, static_cast<size_t>(n));
    ::close(pipefd[0]);
    ::waitpid(pid, nullptr, 0);
    auto j = nlohmann::json::parse(answer, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << answer;
    EXPECT_EQ(j["event"], "error");
    EXPECT_EQ(j["kind"], "permission");
    EXPECT_NE(j.value("message", "").find("permission denied"), std::string::npos);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(dumps_in(f.dumps).empty());
    EXPECT_EQ(sim_state(f.host, 7), "running");
    EXPECT_NE(f.service->log().find("refused a request from uid 65534"), std::string::npos) << f.service->log();
}

TEST(ServiceE2E, MinIntervalSkipsACrashLoop) {
    // A crash-looping guest comes back with a new domid and the same uuid
    // (the simulator wants distinct names; the service keys by uuid).
    Fixture f({{7, "loop-a", kUuid1}, {8, "loop-b", kUuid1}, {9, "loop-c", kUuid1}},
              "[Dump]\nMinInterval=1h\n");
    sim({"crash", f.host.string(), "7"});
    ASSERT_TRUE(wait_until([&] { return sidecars_in(f.dumps).size() == 1; })) << f.service->log();
    sim({"crash", f.host.string(), "8"});
    sim({"crash", f.host.string(), "9"});
    ASSERT_TRUE(f.service->logged("2 skipped so far"))
        << f.service->log();
    EXPECT_EQ(dumps_in(f.dumps).size(), 1u);
}

TEST(ServiceE2E, MaxUseKeepsTheNewest) {
    // Each dump of 256 pages is about 1 MiB; room for about two.
    Fixture f({{7, "a", kUuid1}, {8, "b", kUuid2}, {9, "c", kUuid3}}, "[Dump]\nMaxUse=3M\nKeepFree=0\n");
    for (uint32_t d : {7u, 8u, 9u}) {
        sim({"crash", f.host.string(), std::to_string(d)});
        ASSERT_TRUE(wait_until([&] {
            for (const auto& s : sidecars_in(f.dumps))
                if (s.filename().string().starts_with(std::string(1, static_cast<char>('a' + d - 7)) + "-")) return true;
            return false;
        })) << f.service->log();
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // distinct start times
    }
    auto dumps = dumps_in(f.dumps);
    ASSERT_FALSE(dumps.empty());
    bool newest_kept = false, oldest_gone = true;
    for (const auto& d : dumps) {
        newest_kept |= d.filename().string().starts_with("c-9-");
        oldest_gone &= !d.filename().string().starts_with("a-7-");
    }
    EXPECT_TRUE(newest_kept) << f.service->log();
    EXPECT_TRUE(oldest_gone) << f.service->log();
}

TEST(ServiceE2E, SighupWithBrokenConfigKeepsTheOldOne) {
    Fixture f({{7, "web01", kUuid1}}, "[Dump]\nMaxParallel=2\n");
    std::ofstream(f.service->config_file()) << "[Dump]\nMaxParallel=3\nMaxUse=lots\n";
    f.service->signal(SIGHUP);
    ASSERT_TRUE(f.service->logged("keeping the old configuration"))
        << f.service->log();
    EXPECT_NE(f.service->log().find("xen-dumpd.conf:3:"), std::string::npos) << f.service->log();
    // The service runs on with the old one; xen-dumpctl refuses the file as it is (issue 32.7).
    auto s = f.ctl({"status", "--json"});
    EXPECT_EQ(s.exit_code, 2) << s.out;
    EXPECT_NE(s.err.find("xen-dumpd.conf:3:"), std::string::npos) << s.err;
    auto old = xendump::daemon::control_request(f.service->socket(), {{"command", "status"}}, std::chrono::seconds(20));
    EXPECT_EQ(old["max_parallel"], 2);
    std::ofstream(f.service->config_file()) << "[Dump]\nMaxParallel=3\n";
    f.service->signal(SIGHUP);
    ASSERT_TRUE(wait_until([&] {
        auto r = f.ctl({"status", "--json"});
        return r.exit_code == 0 && nlohmann::json::parse(r.out)["max_parallel"] == 3;
    }));
}

TEST(ServiceE2E, KillMidDumpThenRestartDumpsTheCrash) {
    Fixture f({{7, "slow", kUuid1, 2048, 1000000}});
    sim({"crash", f.host.string(), "7"});
    ASSERT_TRUE(wait_until([&] {
        auto s = f.ctl({"status", "--json"});
        return s.out.find("\"running\"") != std::string::npos;
    })) << f.service->log();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    f.service->kill_hard();
    EXPECT_TRUE(dumps_in(f.dumps).empty());
    // A leftover of a writer without O_TMPFILE, as a kill would leave it.
    std::ofstream(f.dumps / ".xendump-tmp.slow-7.core.abc123") << "partial";
    f.service->start();
    ASSERT_TRUE(f.service->wait_ready()) << f.service->log();
    EXPECT_TRUE(temporaries_in(f.dumps).empty());
    ASSERT_TRUE(wait_until([&] { return dumps_in(f.dumps).size() == 1; }, std::chrono::seconds(60)))
        << f.service->log();
    f.expect_verifies(dumps_in(f.dumps).at(0));
}

TEST(ServiceE2E, SigtermMidDumpAbandonsCleanly) {
    Fixture f({{7, "slow", kUuid1, 2048, 1000000}});
    std::vector<std::string> argv{"xen-dumpd", "--domain", "7", "--quiet"};
    auto common = f.service->common_args();
    argv.insert(argv.end(), common.begin(), common.end());
    RunResult request;
    std::thread client([&] { request = run(argv); });
    ASSERT_TRUE(wait_until([&] { return sim_state(f.host, 7) == "paused"; })) << f.service->log();
    EXPECT_EQ(f.service->stop(SIGTERM), 0);
    client.join();
    EXPECT_NE(request.exit_code, 0);
    EXPECT_TRUE(dumps_in(f.dumps).empty());
    EXPECT_TRUE(temporaries_in(f.dumps).empty());
    EXPECT_EQ(sim_state(f.host, 7), "running");
    EXPECT_NE(index_of(f.service->notifications(), "STOPPING=1"), SIZE_MAX);
}

TEST(ServiceE2E, FullFilesystemFailsCleanly) {
    TempDir tmp;
    fs::path mnt = tmp / "small";
    fs::create_directories(mnt);
    if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4m") != 0) GTEST_SKIP() << "cannot mount tmpfs (not root?)";
    struct Unmount {
        fs::path p;
        ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
    } unmount{mnt};
    fs::path dumps = mnt / "dumps";
    fs::path host = tmp / "host";
    // 512 pages (2 MiB, 3 MiB expected with the margins) fit the 4 MiB when
    // the dump starts; a filler takes the space while the slow dump runs.
    create_sim_host(host, {{7, "big", kUuid1, 512, 2000000}});
    ServiceProcess service(tmp.path(), host, dumps, "[Dump]\nKeepFree=0\n");
    service.start();
    ASSERT_TRUE(service.wait_ready()) << service.log();
    std::vector<std::string> argv{"xen-dumpd", "--domain", "big", "--quiet"};
    auto common = service.common_args();
    argv.insert(argv.end(), common.begin(), common.end());
    RunResult request;
    std::thread client([&] { request = run(argv); });
    ASSERT_TRUE(wait_until([&] { return sim_state(host, 7) == "paused"; })) << service.log();
    {
        std::ofstream filler(mnt / "filler");
        std::string chunk(65536, 'x');
        for (int i = 0; i < 128 && filler; ++i) filler.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    }
    client.join();
    EXPECT_NE(request.exit_code, 0) << request.out;
    fs::remove(mnt / "filler");
    EXPECT_TRUE(dumps_in(dumps).empty());
    EXPECT_TRUE(temporaries_in(dumps).empty());
    ASSERT_TRUE(wait_until([&] { return sim_state(host, 7) == "running"; }));
    auto sidecars = sidecars_in(dumps);
    ASSERT_EQ(sidecars.size(), 1u) << service.log();
    auto sc = xendump::daemon::read_sidecar(sidecars[0]);
    // Which of the two clean ends it meets is a race with the filler: the
    // write's ENOSPC (failed), or the room check before the next extent
    // seeing the filesystem full (refused, with the figures).
    const bool refused = sc.result == xendump::daemon::DumpOutcome::refused;
    EXPECT_TRUE(sc.result == xendump::daemon::DumpOutcome::failed || refused)
        << xendump::daemon::to_string(sc.result);
    EXPECT_FALSE(sc.error.empty());
    EXPECT_NE(service.log().find(refused ? "refused" : "failed"), std::string::npos) << service.log();
}

namespace {

nlohmann::json status_of(const ServiceProcess& service) {
    return xendump::daemon::control_request(service.socket(), {{"command", "status"}}, std::chrono::seconds(20));
}

bool waiting_for_room(const nlohmann::json& status, uint32_t domid) {
    for (const auto& c : status.value("crashes_waiting_for_room", nlohmann::json::array()))
        if (c.value("domid", 0u) == domid && !c.value("error", "").empty()) return true;
    return false;
}

}  // namespace

// Issue 16.2: a full dump filesystem aborted the service (CrashBook::save
// threw out of the crash scan), and every restart aborted again.
TEST(ServiceE2E, FullDumpFilesystemIsSurvivedAndTheCrashDumpedWhenRoomReturns) {
    TempDir tmp;
    SmallFilesystem small(tmp / "small", "8m");
    if (!small.mounted()) GTEST_SKIP() << "cannot mount tmpfs (not root?)";
    fs::path dumps = tmp / "small" / "dumps";
    fs::path host = tmp / "host";
    create_sim_host(host, {{7, "web01", kUuid1}, {8, "db01", kUuid2}});
    ServiceProcess service(tmp.path(), host, dumps, "[Dump]\nKeepFree=0\n");
    service.start();
    ASSERT_TRUE(service.wait_ready()) << service.log();
    small.fill();
    sim({"crash", host.string(), "7"});
    ASSERT_TRUE(wait_until([&] { return service.log().find("for want of room") != std::string::npos || !service.running(); }))
        << service.log();
    ASSERT_TRUE(service.running()) << service.log();
    auto status = status_of(service);
    EXPECT_TRUE(waiting_for_room(status, 7)) << status.dump();
    EXPECT_TRUE(status.contains("state_file_error")) << status.dump();
    auto text = run({"xen-dumpctl", "status", "--config", service.config_file().string(), "--socket",
                     service.socket().string()});
    EXPECT_NE(text.out.find("Crash of domain 7 waits for room"), std::string::npos) << text.out << text.err;
    EXPECT_EQ(sim_state(host, 7), "crashed");

    // A restart on the still full filesystem starts, and waits for room too.
    EXPECT_EQ(service.stop(SIGTERM), 0) << service.log();
    service.start();
    ASSERT_TRUE(service.wait_ready()) << service.log();
    ASSERT_TRUE(wait_until([&] { return count_of(service.log(), "for want of room") >= 2 || !service.running(); }))
        << service.log();
    ASSERT_TRUE(service.running()) << service.log();
    EXPECT_TRUE(waiting_for_room(status_of(service), 7));
    EXPECT_TRUE(dumps_in(dumps).empty());

    small.empty();
    ASSERT_TRUE(wait_until([&] { return dumps_in(dumps).size() == 1 && sidecars_in(dumps).size() == 1; }))
        << service.log();
    auto dump = dumps_in(dumps).at(0);
    EXPECT_TRUE(dump.filename().string().starts_with("web01-7-")) << dump;
    EXPECT_TRUE(xendump::DumpReader::open(dump).verify().empty());
    auto sc = xendump::daemon::read_sidecar(sidecars_in(dumps).at(0));
    EXPECT_EQ(sc.result, xendump::daemon::DumpOutcome::ok);
    EXPECT_EQ(sc.reason, "crash");
    ASSERT_TRUE(wait_until([&] {
        auto s = status_of(service);
        return s["crashes_waiting_for_room"].empty() && !s.contains("state_file_error");
    })) << status_of(service).dump();
    // Handled for good: neither this service nor the next dumps it again.
    EXPECT_EQ(service.stop(SIGTERM), 0);
    service.start();
    ASSERT_TRUE(service.wait_ready()) << service.log();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    EXPECT_EQ(dumps_in(dumps).size(), 1u);
    EXPECT_EQ(sim_state(host, 7), "crashed");
}

// Issue 16.6: a thread per connection before the peer check; idle
// connections exhausted tasks and descriptors, spun the accept loop and
// delayed crash dumps behind the socket.
TEST(ServiceE2E, ControlSocketFloodNeitherAbortsNorDelaysCrashDumps) {
    TempDir tmp;
    fs::path host = tmp / "host", dumps = tmp / "dumps";
    create_sim_host(host, {{7, "web01", kUuid1}, {8, "db01", kUuid2}});
    ServiceProcess service(tmp.path(), host, dumps);
    service.set_nofile_limit(256);
    service.start();
    ASSERT_TRUE(service.wait_ready()) << service.log();
    auto idle = idle_clients(service.socket(), 400);
    ASSERT_GE(idle.size(), 40u);
    auto cpu_before = service.cpu_time();
    auto wall_before = std::chrono::steady_clock::now();
    sim({"crash", host.string(), "7"});
    // Well before the idle clients time out (10 s): the crash does not wait for the socket.
    ASSERT_TRUE(wait_until([&] { return sidecars_in(dumps).size() == 1 || !service.running(); },
                           std::chrono::seconds(9)))
        << service.log();
    ASSERT_TRUE(service.running()) << service.log();
    ASSERT_EQ(dumps_in(dumps).size(), 1u) << service.log();
    EXPECT_EQ(xendump::daemon::read_sidecar(sidecars_in(dumps).at(0)).result, xendump::daemon::DumpOutcome::ok);
    EXPECT_LE(service.threads(), 32u + 8u);
    EXPECT_LE(service.open_fds(), 32u + 40u);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - wall_before);
    // Nothing spins: the dump itself takes a fraction of this.
    EXPECT_LT((service.cpu_time() - cpu_before).count(), wall.count() / 2) << "cpu " << (service.cpu_time() - cpu_before).count();
    // Idle clients are told and dropped.
    std::string line = idle.front().read_line(std::chrono::seconds(15));
    EXPECT_NE(line.find("no request within"), std::string::npos) << line;
    idle.clear();
    auto status = status_of(service);
    EXPECT_EQ(status["event"], "status") << status.dump();
    EXPECT_TRUE(service.running());
    EXPECT_EQ(service.stop(SIGTERM), 0);
}

// Issue 16.6: 81 idle connections under a 64-task limit (systemd's
// TasksMax=) aborted the service: std::thread threw out of the accept loop.
TEST(ServiceE2E, IdleConnectionsUnderATaskLimitDoNotAbort) {
    TaskLimit tasks(64);
    if (!tasks.ok()) GTEST_SKIP() << "no pids cgroup to be had here";
    TempDir tmp;
    fs::path host = tmp / "host", dumps = tmp / "dumps";
    create_sim_host(host, {{7, "web01", kUuid1}, {8, "db01", kUuid2}});
    ServiceProcess service(tmp.path(), host, dumps);
    service.set_task_limit(&tasks);
    service.start();
    ASSERT_TRUE(service.wait_ready()) << service.log();
    auto idle = idle_clients(service.socket(), 100);
    ASSERT_GE(idle.size(), 40u);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ASSERT_TRUE(service.running()) << service.log();
    EXPECT_LT(service.threads(), 64u);
    sim({"crash", host.string(), "7"});
    ASSERT_TRUE(wait_until([&] { return sidecars_in(dumps).size() == 1 || !service.running(); })) << service.log();
    ASSERT_TRUE(service.running()) << service.log();
    EXPECT_EQ(xendump::daemon::read_sidecar(sidecars_in(dumps).at(0)).result, xendump::daemon::DumpOutcome::ok);
    idle.clear();
    EXPECT_EQ(status_of(service)["event"], "status");
    EXPECT_EQ(service.stop(SIGTERM), 0) << service.log();
}

// Issue 16.9: a line that is not a JSON request got no reply at all.
TEST(ServiceE2E, BadJsonOnTheSocketGetsAnErrorReply) {
    Fixture f({{7, "web01", kUuid1}});
    for (std::string bad : {"{not json\n", "[1,2]\n", "{\"command\":5}\n", "{\"command\":\"dump\",\"live\":\"yes\"}\n",
                            "\"status\"\n",
                            // A dump's threads (xen-dumpd --domain --threads): 1 to 64.
                            "{\"command\":\"dump\",\"domain\":\"web01\",\"threads\":0}\n",
                            "{\"command\":\"dump\",\"domain\":\"web01\",\"threads\":65}\n",
                            "{\"command\":\"dump\",\"domain\":\"web01\",\"threads\":\"2\"}\n"}) {
        RawClient c(f.service->socket());
        ASSERT_TRUE(c.connected());
        c.send(bad);
        std::string line = c.read_line(std::chrono::seconds(10));
        auto reply = nlohmann::json::parse(line, nullptr, false);
        ASSERT_FALSE(reply.is_discarded()) << "no reply to " << bad << ": " << line;
        EXPECT_EQ(reply["event"], "error") << bad;
        EXPECT_EQ(reply["kind"], "request") << bad;
        EXPECT_FALSE(reply.value("message", "").empty()) << bad;
    }
    EXPECT_EQ(status_of(*f.service)["event"], "status");
    EXPECT_EQ(sim_state(f.host, 7), "running");
}

// Issue 16.9: --socket naming a regular file deleted it.
TEST(ServiceE2E, SocketPathThatIsNotASocketIsNeverReplaced) {
    TempDir tmp;
    fs::path host = tmp / "host";
    create_sim_host(host, {{7, "web01", kUuid1}});
    fs::path precious = tmp / "precious.txt";
    std::ofstream(precious) << "keep me\n";
    fs::create_symlink(precious, tmp / "link.sock");
    for (const fs::path& target : {precious, tmp / "link.sock"}) {
        ServiceProcess service(tmp.path(), host, tmp / "dumps");
        auto args = service.common_args();
        for (size_t i = 0; i + 1 < args.size(); ++i)
            if (args[i] == "--socket") args[i + 1] = target.string();
        service.set_args(args);
        service.start();
        ASSERT_TRUE(wait_until([&] { return !service.running(); })) << service.log();
        EXPECT_NE(service.exit_status(), 0);
        EXPECT_NE(service.log().find("not a socket"), std::string::npos) << service.log();
        EXPECT_TRUE(fs::is_symlink(tmp / "link.sock"));
        std::ifstream in(precious);
        std::string text;
        std::getline(in, text);
        EXPECT_EQ(text, "keep me") << target;
    }
}
