// Issue 32.5: the service's room (MaxUse=, KeepFree=) is counted from what a
// dump occupies on disk as it grows, not from its guest's size: a crashed
// guest whose dump is mostly holes was refused under a MaxUse= below the
// guest's size and stayed queued. xen-dumpd as a process on a small tmpfs.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "control_protocol.hpp"
#include "service_harness.hpp"
#include "sidecar.hpp"
#include "xendump/reader.hpp"

using namespace xendump::test;
namespace fs = std::filesystem;
namespace xd = xendump::daemon;

namespace {

const std::string kUuid1 = "11111111-1111-4111-8111-111111111111";
const std::string kUuid2 = "22222222-2222-4222-8222-222222222222";

constexpr uint64_t kMiB = 1 << 20;
// A 64 MiB guest: 16384 pages.
constexpr uint64_t kGuestPages = 16384;
// ... of which all but 2048 (8 MiB) are zero: its dump takes about 8.5 MiB.
const std::vector<std::pair<uint64_t, uint64_t>> kMostlyZero = {{1024, kGuestPages - 2048}};
// ... of which all but 4096 (16 MiB) are zero: about 16.6 MiB.
const std::vector<std::pair<uint64_t, uint64_t>> kHalfZero = {{1024, kGuestPages - 4096}};

uint64_t on_disk(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

struct RoomFixture {
    TempDir tmp;
    SmallFilesystem small{tmp / "small", "160m"};
    fs::path host = tmp / "host";
    fs::path dumps = tmp / "small" / "dumps";
    std::unique_ptr<ServiceProcess> service;

    bool start(const std::vector<SimDomainSpec>& domains, const std::string& config) {
        if (!small.mounted()) return false;
        create_sim_host(host, domains);
        service = std::make_unique<ServiceProcess>(tmp.path(), host, dumps, config);
        service->start();
        if (!service->wait_ready()) throw std::runtime_error("service not ready: " + service->log());
        return true;
    }
    // xen-dumpd --domain DOMID through the running service.
    RunResult request(uint32_t domid) {
        std::vector<std::string> argv{"xen-dumpd", "--domain", std::to_string(domid), "--quiet"};
        auto common = service->common_args();
        argv.insert(argv.end(), common.begin(), common.end());
        return run(argv);
    }
    nlohmann::json status() const {
        return xd::control_request(service->socket(), {{"command", "status"}}, std::chrono::seconds(20));
    }
    bool waits_for_room(uint32_t domid) const {
        for (const auto& c : status().value("crashes_waiting_for_room", nlohmann::json::array()))
            if (c.value("domid", 0u) == domid) return true;
        return false;
    }
};

void expect_verifies(const fs::path& p) {
    auto findings = xendump::DumpReader::open(p).verify();
    EXPECT_TRUE(findings.empty()) << p << ": " << (findings.empty() ? "" : findings.front().message);
}

}  // namespace

// MaxUse= below each guest's size (64 MiB, 65.5 MiB by the old estimate)
// and above what its dump occupies: both crash dumps are written, v1 and
// compact (a [Domain] section's Format=kdump).
TEST(ServiceRoom, SparseCrashDumpsUnderAMaxUseBelowTheGuestsSizeAreWritten) {
    RoomFixture f;
    if (!f.start({{7, "web01", kUuid1, kGuestPages, 0, kMostlyZero}, {8, "db01", kUuid2, kGuestPages, 0, kMostlyZero}},
                 "[Dump]\nKeepFree=0\nMaxUse=24M\n\n[Domain db01]\nFormat=kdump\n"))
        GTEST_SKIP() << "cannot mount tmpfs (not root?)";
    sim({"crash", f.host.string(), "7"});
    sim({"crash", f.host.string(), "8"});
    ASSERT_TRUE(wait_until([&] { return sidecars_in(f.dumps).size() == 2; }, std::chrono::seconds(60)))
        << f.service->log();
    ASSERT_TRUE(wait_until([&] { return f.status()["jobs"].empty(); })) << f.status().dump();
    auto dumps = dumps_in(f.dumps);
    ASSERT_EQ(dumps.size(), 2u) << f.service->log();
    uint64_t total = 0;
    for (const auto& d : dumps) {
        SCOPED_TRACE(d.filename().string());
        auto sc = xd::read_sidecar(xd::sidecar_path(d));
        EXPECT_EQ(sc.result, xd::DumpOutcome::ok) << sc.error;
        EXPECT_EQ(sc.reason, "crash");
        EXPECT_EQ(sc.format, d.filename().string().starts_with("db01-") ? "kdump" : "v1");
        expect_verifies(d);
        EXPECT_LT(on_disk(d), 12 * kMiB);
        total += on_disk(d);
    }
    EXPECT_LT(total, 24 * kMiB);
    EXPECT_FALSE(f.waits_for_room(7));
    EXPECT_FALSE(f.waits_for_room(8));
    EXPECT_TRUE(temporaries_in(f.dumps).empty());
}

// A dump that outgrows its room (a 64 MiB guest without zero pages under
// MaxUse=24M: its first step fits) stops, is recorded as refused with the
// figures, leaves nothing behind, and its crash waits for room; with room
// (MaxUse= raised, SIGHUP) it is dumped.
TEST(ServiceRoom, DumpThatOutgrowsItsRoomIsRefusedLeavesNothingAndWaitsForRoom) {
    RoomFixture f;
    if (!f.start({{7, "web01", kUuid1, kGuestPages}}, "[Dump]\nKeepFree=0\nMaxUse=24M\n"))
        GTEST_SKIP() << "cannot mount tmpfs (not root?)";
    sim({"crash", f.host.string(), "7"});
    ASSERT_TRUE(f.service->logged("for want of room", std::chrono::seconds(60))) << f.service->log();
    EXPECT_TRUE(dumps_in(f.dumps).empty());
    EXPECT_TRUE(temporaries_in(f.dumps).empty());
    auto sidecars = sidecars_in(f.dumps);
    ASSERT_EQ(sidecars.size(), 1u) << f.service->log();
    auto sc = xd::read_sidecar(sidecars[0]);
    EXPECT_EQ(sc.result, xd::DumpOutcome::refused);
    // The limit and what the growing dump had and needed.
    EXPECT_NE(sc.error.find("MaxUse=25165824 (24.0 MiB)"), std::string::npos) << sc.error;
    EXPECT_NE(sc.error.find("the dump occupied "), std::string::npos) << sc.error;
    EXPECT_NE(sc.error.find(" more to go on"), std::string::npos) << sc.error;
    EXPECT_NE(f.service->log().find("refused: not enough room"), std::string::npos) << f.service->log();
    EXPECT_TRUE(f.waits_for_room(7)) << f.status().dump();
    EXPECT_EQ(sim_state(f.host, 7), "crashed");

    std::ofstream(f.service->config_file()) << "[Dump]\nKeepFree=0\nMaxUse=100M\n";
    f.service->signal(SIGHUP);
    ASSERT_TRUE(wait_until([&] { return dumps_in(f.dumps).size() == 1; }, std::chrono::seconds(90)))
        << f.service->log();
    ASSERT_TRUE(wait_until([&] { return !f.waits_for_room(7); })) << f.status().dump();
    auto dump = dumps_in(f.dumps).at(0);
    expect_verifies(dump);
    EXPECT_EQ(xd::read_sidecar(xd::sidecar_path(dump)).result, xd::DumpOutcome::ok);
    EXPECT_GT(on_disk(dump), 60 * kMiB);
    EXPECT_TRUE(temporaries_in(f.dumps).empty());
}

// Under MaxUse=44M two dumps of about 16.6 MiB fit together: the second
// removes nothing. The third starts beside them (its first step fits) and
// needs room as it grows: the oldest goes then, and only it.
TEST(ServiceRoom, OldDumpIsRemovedOnlyWhenTheGrowingDumpNeedsItsRoom) {
    RoomFixture f;
    if (!f.start({{7, "web01", kUuid1, kGuestPages, 0, kHalfZero}}, "[Dump]\nKeepFree=0\nMaxUse=44M\n"))
        GTEST_SKIP() << "cannot mount tmpfs (not root?)";
    std::vector<fs::path> written;
    for (int i = 0; i < 3; ++i) {
        auto r = f.request(7);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err << f.service->log();
        fs::path newest;
        for (const auto& d : dumps_in(f.dumps))
            if (std::find(written.begin(), written.end(), d) == written.end()) newest = d;
        ASSERT_FALSE(newest.empty()) << f.service->log();
        written.push_back(newest);
        EXPECT_EQ(xd::read_sidecar(xd::sidecar_path(newest)).result, xd::DumpOutcome::ok);
        if (i == 1) {
            // Both fit: the first stays.
            EXPECT_TRUE(fs::exists(written[0])) << f.service->log();
            EXPECT_EQ(f.service->log().find("removed "), std::string::npos) << f.service->log();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // distinct start times
    }
    EXPECT_FALSE(fs::exists(written[0])) << f.service->log();
    EXPECT_FALSE(fs::exists(xd::sidecar_path(written[0])));
    EXPECT_TRUE(fs::exists(written[1])) << f.service->log();
    EXPECT_TRUE(fs::exists(written[2]));
    EXPECT_NE(f.service->log().find("removed " + written[0].string() + " (storage limits: room for " +
                                    written[2].filename().string() + " being written)"),
              std::string::npos)
        << f.service->log();
    expect_verifies(written[2]);
    uint64_t used = 0;
    for (const auto& d : dumps_in(f.dumps)) used += on_disk(d) + on_disk(xd::sidecar_path(d));
    EXPECT_LE(used, 44 * kMiB);
}
