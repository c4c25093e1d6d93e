// The soak of issue 16, bounded: the service under a crash storm of 20
// simulated domains while 200 clients connect and disconnect, the dump
// filesystem fills and empties, and SIGHUP reloads. Afterwards every crash
// is dumped exactly once or recorded as failed with its reason, no domain is
// left paused, and the service still answers.
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "control_protocol.hpp"
#include "service_harness.hpp"
#include "sidecar.hpp"
#include "xendump/reader.hpp"

using namespace xendump::test;
namespace fs = std::filesystem;

namespace {

constexpr uint32_t kFirst = 10;
constexpr uint32_t kDomains = 20;

std::string uuid_of(uint32_t domid) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%08x-0000-4000-8000-%012x", domid, domid);
    return buf;
}

// domid -> state, one listing of the whole host.
std::map<uint32_t, std::string> host_states(const fs::path& host) {
    std::map<uint32_t, std::string> out;
    auto r = run({"xen-dump-sim", "list", host.string(), "--json"});
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_discarded()) return out;
    for (const auto& d : j) out[d.value("domid", 0u)] = d.value("state", "?");
    return out;
}

// One client of the 200: asks for the status, sends garbage, or just comes
// and goes (at once, or halfway through a line). True when it got the
// answer it should.
bool one_client(const fs::path& socket, unsigned kind) {
    switch (kind % 4) {
        case 0: {
            auto reply = xendump::daemon::control_request(socket, {{"command", "status"}}, std::chrono::seconds(30));
            return reply.value("event", "") == "status";
        }
        case 1: {
            RawClient c(socket);
            c.send("{\"command\": no json here\n");
            auto reply = nlohmann::json::parse(c.read_line(std::chrono::seconds(30)), nullptr, false);
            return !reply.is_discarded() && reply.value("event", "") == "error";
        }
        case 2: {
            RawClient c(socket);  // and gone
            return true;
        }
        default: {
            RawClient c(socket);
            c.send("{\"command\":\"sta");
            return true;
        }
    }
}

}  // namespace

TEST(Soak, CrashStormClientsFullDiskAndReloads) {
    TempDir tmp;
    SmallFilesystem small(tmp / "small", "64m");
    if (!small.mounted()) GTEST_SKIP() << "cannot mount tmpfs (not root?)";
    fs::path dumps = tmp / "small" / "dumps";
    fs::path host = tmp / "host";
    std::vector<SimDomainSpec> specs;
    // Each dump is about 1 MiB; a small map cost keeps a few running at
    // once, so that the disk fills under some of them.
    for (uint32_t d = kFirst; d < kFirst + kDomains; ++d)
        specs.push_back({d, "guest" + std::to_string(d), uuid_of(d), 256, 2000000});
    create_sim_host(host, specs);
    ServiceProcess service(tmp.path(), host, dumps, "[Dump]\nKeepFree=0\nMaxParallel=2\n");
    service.start();
    ASSERT_TRUE(service.wait_ready()) << service.log();
    service.keep_reading_notifications();

    std::atomic<unsigned> answered{0}, unanswered{0};
    std::vector<std::thread> clients;
    for (unsigned t = 0; t < 4; ++t)
        clients.emplace_back([&, t] {
            for (unsigned i = 0; i < 50; ++i) {
                bool ok = false;
                try {
                    ok = one_client(service.socket(), t + i);
                } catch (const std::exception&) {
                }
                ++(ok ? answered : unanswered);
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        });

    // The storm, on a full disk first (nothing there to make room: the
    // crashes wait), then emptied, then filled again under running dumps.
    small.fill();
    for (uint32_t d = kFirst; d < kFirst + kDomains / 2; ++d) sim({"crash", host.string(), std::to_string(d)});
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ASSERT_TRUE(service.running()) << service.log();
    std::ofstream(service.config_file()) << "[Dump]\nKeepFree=0\nMaxParallel=3\n";
    service.signal(SIGHUP);
    small.empty();
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    for (uint32_t d = kFirst + kDomains / 2; d < kFirst + kDomains; ++d) sim({"crash", host.string(), std::to_string(d)});
    small.fill();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    std::ofstream(service.config_file()) << "[Dump]\nKeepFree=0\nMaxParallel=2\n";
    service.signal(SIGHUP);
    small.empty();
    for (auto& c : clients) c.join();

    // What the service said about each crash: dumps written (the storage
    // limits may remove older ones again to make room), and final failures.
    auto written = [&](uint32_t d) {
        return count_of(service.log(), "dump of guest" + std::to_string(d) + " (domain " + std::to_string(d) + ") written to ");
    };
    auto failures = [&](uint32_t d) {
        std::vector<std::string> out;
        std::string log = service.log();
        for (const char* what : {") failed: ", ") refused: "}) {
            std::string key = "dump of guest" + std::to_string(d) + " (domain " + std::to_string(d) + what;
            for (size_t at = log.find(key); at != std::string::npos; at = log.find(key, at + 1))
                out.push_back(log.substr(at + key.size(), log.find('\n', at) - at - key.size()));
        }
        return out;
    };
    // Everything settles: every crash dumped or finally failed, nothing queued or waiting.
    auto settled = [&] {
        if (!service.running()) return true;
        nlohmann::json status;
        try {
            status = xendump::daemon::control_request(service.socket(), {{"command", "status"}});
        } catch (const std::exception&) {
            return false;
        }
        if (!status["jobs"].empty() || !status["crashes_waiting_for_room"].empty()) return false;
        for (uint32_t d = kFirst; d < kFirst + kDomains; ++d)
            if (written(d) == 0 && failures(d).empty()) return false;
        return true;
    };
    ASSERT_TRUE(wait_until(settled, std::chrono::seconds(60))) << service.log();
    ASSERT_TRUE(service.running()) << service.log();

    for (uint32_t d = kFirst; d < kFirst + kDomains; ++d) {
        if (written(d) == 1) continue;
        EXPECT_EQ(written(d), 0u) << "domain " << d << " dumped " << written(d) << " times";
        auto f = failures(d);
        ASSERT_FALSE(f.empty()) << "domain " << d << " neither dumped nor recorded as failed";
        for (const auto& e : f) EXPECT_FALSE(e.empty()) << "domain " << d << ": a failure without its reason";
    }
    // What is left on disk is whole: each dump verifies and has its sidecar.
    size_t ok_sidecars = 0;
    for (const auto& s : sidecars_in(dumps)) {
        auto sc = xendump::daemon::read_sidecar(s);
        EXPECT_EQ(sc.reason, "crash") << s;
        EXPECT_EQ(sc.uuid, uuid_of(sc.domid)) << s;
        if (sc.result == xendump::daemon::DumpOutcome::ok) {
            ++ok_sidecars;
            fs::path dump = s.parent_path() / sc.dump_file;
            EXPECT_TRUE(fs::exists(dump)) << dump;
            EXPECT_TRUE(xendump::DumpReader::open(dump).verify().empty()) << dump;
        } else {
            EXPECT_FALSE(sc.error.empty()) << s;
        }
    }
    EXPECT_EQ(dumps_in(dumps).size(), ok_sidecars);
    std::string log = service.log();
    std::cout << "soak: " << count_of(log, ") written to ") << " dumps written, " << count_of(log, "for want of room")
              << " attempts stopped for want of room, " << count_of(log, "there is room again") << " retries, "
              << count_of(log, "(storage limits)") << " removed by the storage limits, " << answered << " of 200 clients answered\n";
    EXPECT_TRUE(temporaries_in(dumps).empty());
    for (const auto& [domid, state] : host_states(host)) EXPECT_NE(state, "paused") << "domain " << domid;
    // The disk did fill under the storm (else this soak showed nothing).
    EXPECT_NE(service.log().find("for want of room"), std::string::npos) << service.log();
    EXPECT_EQ(count_of(service.log(), "configuration reloaded"), 2u) << service.log();
    EXPECT_EQ(answered + unanswered, 200u);
    EXPECT_EQ(unanswered.load(), 0u);
    EXPECT_EQ(xendump::daemon::control_request(service.socket(), {{"command", "status"}})["event"], "status");
    EXPECT_EQ(service.stop(SIGTERM), 0) << service.log();
}
