// Issue 18 item 4, where dump levels are used: `xen-dumpd --domain N
// --format kdump --dump-level N` on a live (simulated) guest keeps what
// `xen-dump-convert --dump-level N` keeps of the v1 dump of the same guest;
// `xen-dumpd --domain N --estimate` prints what `xen-dumpctl estimate`
// prints for that v1 dump and leaves the guest running; the service's
// Format=, Compress=, DumpLevel= with a [Domain NAME] drop-in decide the
// files of two crashed guests, recorded in their sidecars and journal
// entries. The Linux guest is the real fixture RAM as an HVM guest
// (tests/kernel/guest_ram.hpp), the other a PV guest without a kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config.hpp"
#include "dump_job.hpp"
#include "fixture_host.hpp"
#include "guest_ram.hpp"
#include "journal_log.hpp"
#include "service_harness.hpp"
#include "sidecar.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint32_t kLinux = kFixtureLinux, kPattern = kFixturePattern;

// One host for the one-shot tests (they leave the guests running).
FixtureHost& one_shot_host() {
    static FixtureHost h;
    return h;
}

// The v1 dump of the Linux guest, written once.
const fs::path& v1_dump() {
    static const fs::path path = [] {
        FixtureHost& h = one_shot_host();
        const fs::path p = h.tmp / "linux.v1.core";
        RunResult r = h.dumpd("linux", {"-q", "-o", p.string()});
        if (r.exit_code != 0) throw std::runtime_error("v1 dump: " + r.err);
        return p;
    }();
    return path;
}

std::vector<uint64_t> pfns_of(const DumpReader& r) {
    std::vector<uint64_t> out;
    out.reserve(r.nr_pages());
    for (uint64_t i = 0; i < r.nr_pages(); ++i) out.push_back(r.entry(i).pfn);
    return out;
}

TEST(DumpLevels, LiveKdumpAtLevel31KeepsWhatConvertKeepsOfTheV1Dump) {
    FixtureHost& h = one_shot_host();
    const fs::path v1 = v1_dump(), live = h.tmp / "linux-d31.kdump", converted = h.tmp / "linux-d31.converted";
    RunResult d = h.dumpd("linux", {"-o", live.string(), "--format", "kdump", "--dump-level", "31"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_EQ(d.err.find("warning"), std::string::npos) << d.err;  // the guest has VMCOREINFO: level 31 applies
    RunResult c = run({"xen-dump-convert", "-q", "--format", "kdump", "--dump-level", "31", "-o", converted.string(),
                       v1.string()});
    ASSERT_EQ(c.exit_code, 0) << c.err;

    DumpReader orig = DumpReader::open(v1), a = DumpReader::open(live), b = DumpReader::open(converted);
    EXPECT_EQ(a.format(), FileFormat::kdump);
    EXPECT_TRUE(a.verify().empty());
    ASSERT_LT(a.nr_pages(), orig.nr_pages());  // level 31 left pages out
    ASSERT_GT(a.nr_pages(), 0u);
    const std::vector<uint64_t> kept = pfns_of(a);
    EXPECT_TRUE(kept == pfns_of(b)) << a.nr_pages() << " pages kept live, " << b.nr_pages() << " by the converter";
    // Every kept page as the v1 dump has it.
    std::vector<std::byte> x(4096), y(4096);
    for (uint64_t pfn : kept) {
        ASSERT_TRUE(a.read_page_by_pfn(pfn, x));
        ASSERT_TRUE(orig.read_page_by_pfn(pfn, y));
        ASSERT_EQ(0, std::memcmp(x.data(), y.data(), 4096)) << "pfn " << pfn;
    }
    EXPECT_EQ(sim_state(h.host, kLinux), "running");
    std::cout << "[ measured ] level 31 keeps " << a.nr_pages() << " of " << orig.nr_pages() << " pages; "
              << fs::file_size(live) << " bytes against " << fs::file_size(v1) << " (v1)\n";
}

TEST(DumpLevels, EstimatePrintsWhatCtlEstimatePrintsForTheV1DumpAndTheGuestRuns) {
    FixtureHost& h = one_shot_host();
    const fs::path v1 = v1_dump();
    RunResult live = h.dumpd("linux", {"--estimate", "--json=short"});
    ASSERT_EQ(live.exit_code, 0) << live.err;
    RunResult file = run({"xen-dumpctl", "estimate", "--json=short", v1.string()});
    ASSERT_EQ(file.exit_code, 0) << file.err;
    json a = json::parse(live.out), b = json::parse(file.out);
    EXPECT_EQ(a.at("source"), "domain linux (7)");
    for (const char* key : {"total_pages", "max_level", "limits", "classes", "protected_pages",
                            "unreadable_struct_pages", "levels", "page_size"})
        EXPECT_EQ(a.at(key), b.at(key)) << key;
    EXPECT_EQ(a.at("max_level"), 31);
    EXPECT_EQ(a.at("total_pages"), DumpReader::open(v1).nr_pages());
    // The guest was paused for it and runs again; so after the text form.
    EXPECT_EQ(sim_state(h.host, kLinux), "running");
    RunResult text = h.dumpd("linux", {"--estimate"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("Source:      domain linux (7)\n"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("\nLEVEL "), std::string::npos) << text.out;
    EXPECT_EQ(sim_state(h.host, kLinux), "running");
    // A paused guest stays paused (the estimate's pause nests).
    sim({"pause", h.host.string(), std::to_string(kLinux)});
    ASSERT_EQ(h.dumpd("linux", {"--estimate", "--json"}).exit_code, 0);
    EXPECT_EQ(sim_state(h.host, kLinux), "paused");
    sim({"unpause", h.host.string(), std::to_string(kLinux)});
    EXPECT_EQ(sim_state(h.host, kLinux), "running");
}

// A guest without VMCOREINFO: level 1 at most, said on standard error and
// recorded in the sidecar; its estimate says so too.
TEST(DumpLevels, GuestWithoutVmcoreinfoGetsLevel1AndSaysSo) {
    FixtureHost& h = one_shot_host();
    RunResult d = h.dumpd("pattern", {"--format", "kdump", "--dump-level", "31"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_NE(d.err.find("warning: dump level 1 instead of 31: "), std::string::npos) << d.err;
    const fs::path dump = d.out.substr(0, d.out.find('\n'));
    const daemon::Sidecar s = daemon::read_sidecar(daemon::sidecar_path(dump));
    EXPECT_EQ(s.format, "kdump");
    EXPECT_EQ(s.dump_level, std::optional<unsigned>(1));
    EXPECT_EQ(s.compression, std::optional<std::string>("zstd"));
    EXPECT_EQ(DumpReader::open(dump).format(), FileFormat::kdump);

    RunResult e = h.dumpd("pattern", {"--estimate", "--json"});
    ASSERT_EQ(e.exit_code, 0) << e.err;
    const json j = json::parse(e.out);
    EXPECT_EQ(j.at("max_level"), 1);
    EXPECT_FALSE(j.at("limits").empty());
    EXPECT_EQ(sim_state(h.host, kPattern), "running");
}

TEST(DumpLevels, CommandLineRefusesWhatV1AndEstimateCannotMean) {
    FixtureHost& h = one_shot_host();
    struct Case {
        std::vector<std::string> args;
        const char* message;
    } cases[] = {
        {{"--format", "v1", "--dump-level", "31"}, "--dump-level needs --format kdump"},
        {{"--dump-level", "31"}, "--dump-level needs --format kdump"},
        {{"--format", "kdump", "--dump-level", "32"}, "--dump-level wants a number from 0 to 31"},
        {{"--json"}, "--json needs --estimate"},
        {{"--estimate", "-o", "x.core"}, "--estimate writes no dump"},
        {{"--estimate", "--format", "kdump"}, "--estimate writes no dump"},
        {{"--estimate", "--json=long"}, "--json takes short or pretty"},
        {{"--estimate", "--dump-level", "32"}, "--dump-level wants a number from 0 to 31"},
    };
    for (const auto& c : cases) {
        RunResult r = h.dumpd("linux", c.args);
        EXPECT_EQ(r.exit_code, 2) << c.args[0] << ": " << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    }
    RunResult r = run({"xen-dumpd", "--estimate"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("need --domain"), std::string::npos) << r.err;
}

// The service: [Dump] Format=kdump DumpLevel=31, and a drop-in's [Domain
// pattern] writing v1 files for that guest. Both guests crash; then a
// request through the control socket names its own format.
TEST(DumpLevels, ServiceWritesEachCrashedGuestAsItsConfigurationSays) {
    FixtureHost h;
    ServiceProcess& service = h.add_service("[Dump]\nKeepFree=0\nFormat=kdump\nDumpLevel=31\n");
    const fs::path drop_ins = daemon::drop_in_dir(service.config_file());
    fs::create_directories(drop_ins);
    std::ofstream(drop_ins / "pattern.conf") << "[Domain pattern]\nFormat=v1\nDumpLevel=0\n";
    service.start();
    ASSERT_TRUE(service.wait_ready()) << service.log();

    auto journal_has = [](const daemon::Sidecar& s, const fs::path& dump, const std::string& item) {
        const auto items = daemon::journal_items(daemon::LogLevel::notice, daemon::dump_journal_message(s, dump),
                                                 daemon::dump_journal_fields(s, dump), daemon::kMessageDumpWritten);
        return std::find(items.begin(), items.end(), item) != items.end();
    };

    const fs::path linux_dump = h.crash_and_wait(kLinux, "linux");
    ASSERT_FALSE(linux_dump.empty());
    const daemon::Sidecar ls = daemon::read_sidecar(daemon::sidecar_path(linux_dump));
    EXPECT_EQ(ls.result, daemon::DumpOutcome::ok) << ls.error;
    EXPECT_EQ(ls.format, "kdump");
    EXPECT_EQ(ls.compression, std::optional<std::string>("zstd"));
    EXPECT_EQ(ls.dump_level, std::optional<unsigned>(31));
    const json raw = json::parse(slurp_text(daemon::sidecar_path(linux_dump)));
    EXPECT_EQ(raw.at("format"), "kdump");
    EXPECT_EQ(raw.at("dump_level"), 31);
    {
        DumpReader r = DumpReader::open(linux_dump);
        EXPECT_EQ(r.format(), FileFormat::kdump);
        // The fixture's 13196 free pages go; its zero pages stay (as the
        // compact file's shared zero page: xen-dump-core(5)).
        EXPECT_LT(r.nr_pages(), kFixturePages * 2 / 3) << "level 31 left out the guest's free pages";
    }
    EXPECT_TRUE(journal_has(ls, linux_dump, "DUMP_FORMAT=kdump"));
    EXPECT_TRUE(journal_has(ls, linux_dump, "DUMP_COMPRESSION=zstd"));
    EXPECT_TRUE(journal_has(ls, linux_dump, "DUMP_LEVEL=31"));
    // The service's log line is the entry's message.
    EXPECT_NE(service.log().find(daemon::dump_journal_message(ls, linux_dump)), std::string::npos) << service.log();

    const fs::path pattern_dump = h.crash_and_wait(kPattern, "pattern");
    ASSERT_FALSE(pattern_dump.empty());
    const daemon::Sidecar ps = daemon::read_sidecar(daemon::sidecar_path(pattern_dump));
    EXPECT_EQ(ps.result, daemon::DumpOutcome::ok) << ps.error;
    EXPECT_EQ(ps.format, "v1");
    EXPECT_FALSE(ps.dump_level.has_value());
    EXPECT_EQ(DumpReader::open(pattern_dump).format(), FileFormat::v1);
    EXPECT_EQ(DumpReader::open(pattern_dump).nr_pages(), 256u);
    EXPECT_TRUE(journal_has(ps, pattern_dump, "DUMP_FORMAT=v1"));
    EXPECT_FALSE(journal_has(ps, pattern_dump, "DUMP_LEVEL=0"));

    // A request on the control socket with its own format: the service
    // writes it (the command's --format, not the configuration's).
    RunResult req = run({"xen-dumpd", "--domain", "pattern", "--config", service.config_file().string(), "--socket",
                         service.socket().string(), "--dump-dir", h.dumps.string(), "--host", "sim:" + h.host.string(),
                         "-q", "--format", "kdump", "--compress", "zlib", "--dump-level", "31"});
    ASSERT_EQ(req.exit_code, 0) << req.err << service.log();
    const fs::path requested = req.out.substr(0, req.out.find('\n'));
    const daemon::Sidecar rs = daemon::read_sidecar(daemon::sidecar_path(requested));
    EXPECT_EQ(rs.reason, "request");
    EXPECT_EQ(rs.format, "kdump");
    EXPECT_EQ(rs.compression, std::optional<std::string>("zlib"));
    EXPECT_EQ(rs.dump_level, std::optional<unsigned>(1));  // no VMCOREINFO: level 1 applied
    EXPECT_NE(service.log().find("dump level 1 instead of 31"), std::string::npos) << service.log();
    EXPECT_EQ(service.stop(), 0) << service.log();
}

}  // namespace
}  // namespace xendump::test
