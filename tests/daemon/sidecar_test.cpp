// Sidecars survive a round trip; damaged ones are refused with their name.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dump_job.hpp"
#include "sidecar.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"

using namespace xendump::daemon;
using xendump::test::TempDir;

TEST(Sidecar, RoundTrip) {
    TempDir dir;
    Sidecar s;
    s.domain_name = "web01";
    s.domid = 7;
    s.uuid = "0d5e9a3c-1f2b-4c6d-8e9f-a0b1c2d3e4f5";
    s.type = "pvh";
    s.reason = "crash";
    s.start_time = 1700000000;
    s.end_time = 1700000042;
    s.pages = 262144;
    s.file_size = 1ull << 30;
    s.bytes_on_disk = 123456789;
    s.digests = "written";
    s.result = DumpOutcome::failed;
    s.error = "No space left on device";
    s.dump_file = "web01-7-20231114T221320Z.core";
    auto p = sidecar_path(dir / s.dump_file);
    EXPECT_EQ(p.filename(), "web01-7-20231114T221320Z.core.json");
    write_sidecar(p, s);
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    Sidecar r = read_sidecar(p);
    EXPECT_EQ(r.to_json(), s.to_json());
    EXPECT_EQ(r.result, DumpOutcome::failed);
    EXPECT_EQ(r.domid, 7u);
    EXPECT_EQ(r.pages, 262144u);
    EXPECT_EQ(r.error, s.error);
    EXPECT_THROW(write_sidecar(p, s), xendump::Error);  // never overwrites
}

// Issue 20 item 3: what the service found of the guest's kernel log.
TEST(Sidecar, GuestLogAndPanicRoundTrip) {
    TempDir dir;
    Sidecar s;
    s.domain_name = "web01";
    s.dump_file = "web01-7-20231114T221320Z.core";
    EXPECT_EQ(dmesg_path(dir / s.dump_file).filename(), "web01-7-20231114T221320Z.core.dmesg.txt");
    // Older sidecars and failed dumps have neither.
    EXPECT_EQ(s.to_json().find("guest_"), std::string::npos);
    s.guest_log = GuestLog{512, true, {"record 3: text past its block"}, "web01-7-20231114T221320Z.core.dmesg.txt", ""};
    s.guest_panic = "[    1.978455] Kernel panic - not syncing: \x1b[2J";
    const auto j = nlohmann::json::parse(s.to_json());
    EXPECT_EQ(j.at("guest_panic"), *s.guest_panic);
    EXPECT_EQ(j.at("guest_log").at("records"), 512);
    EXPECT_EQ(j.at("guest_log").at("partial"), true);
    EXPECT_EQ(j.at("guest_log").at("dmesg_file"), s.guest_log->dmesg_file);
    EXPECT_FALSE(j.at("guest_log").contains("error"));
    auto p = sidecar_path(dir / s.dump_file);
    write_sidecar(p, s);
    Sidecar r = read_sidecar(p);
    EXPECT_EQ(r.to_json(), s.to_json());
    ASSERT_TRUE(r.guest_log && r.guest_log->records);
    EXPECT_EQ(*r.guest_log->records, 512u);
    EXPECT_EQ(r.guest_log->damage, s.guest_log->damage);
    EXPECT_EQ(r.guest_panic, s.guest_panic);

    // A log that could not be read: only the error, and no panic.
    Sidecar none;
    none.guest_log = GuestLog{};
    none.guest_log->error = "no VMCOREINFO of a Linux kernel in the dump";
    const auto n = nlohmann::json::parse(none.to_json());
    EXPECT_EQ(n.at("guest_log"), nlohmann::json({{"error", none.guest_log->error}}));
    EXPECT_EQ(n.at("guest_panic"), nullptr);
    const Sidecar back = Sidecar::from_json(none.to_json(), "none.json");
    ASSERT_TRUE(back.guest_log);
    EXPECT_FALSE(back.guest_log->records);
    EXPECT_EQ(back.guest_log->error, none.guest_log->error);
    EXPECT_FALSE(back.guest_panic);
}

// Issue 20 item 3: the crashed vcpu's top frames.
TEST(Sidecar, GuestBacktraceRoundTripsAndFillsTheJournalLine) {
    Sidecar s;
    s.domain_name = "web01";
    s.guest_log = GuestLog{};
    s.guest_panic = "[    9.960750] Kernel panic - not syncing: sysrq triggered crash";
    EXPECT_FALSE(nlohmann::json::parse(s.to_json()).contains("guest_backtrace"));
    s.guest_backtrace = GuestBacktrace{1, "orc", {"panic+0x118", "sysrq_handle_crash+0x16", "? vfs_write+0xc7"}, ""};
    const auto j = nlohmann::json::parse(s.to_json());
    EXPECT_EQ(j.at("guest_backtrace"),
              nlohmann::json({{"vcpu", 1}, {"method", "orc"}, {"frames", s.guest_backtrace->frames}}));
    const Sidecar r = Sidecar::from_json(s.to_json(), "r.json");
    ASSERT_TRUE(r.guest_backtrace);
    EXPECT_EQ(r.guest_backtrace->frames, s.guest_backtrace->frames);
    EXPECT_EQ(r.to_json(), s.to_json());
    EXPECT_EQ(guest_backtrace_line(*r.guest_backtrace),
              "vcpu 1 (orc): panic+0x118 < sysrq_handle_crash+0x16 < ? vfs_write+0xc7");
    s.guest_backtrace->stopped = "the stack goes the wrong way";
    EXPECT_EQ(Sidecar::from_json(s.to_json(), "p.json").guest_backtrace->stopped, s.guest_backtrace->stopped);
    EXPECT_TRUE(guest_backtrace_line(*s.guest_backtrace).ends_with(" (partial)"));
    const auto fields = dump_journal_fields(s, "/var/lib/xen/dump/web01.core");
    EXPECT_NE(std::find(fields.begin(), fields.end(),
                        std::pair<std::string, std::string>("GUEST_BACKTRACE", guest_backtrace_line(*s.guest_backtrace))),
              fields.end());
    s.result = DumpOutcome::ok;
    EXPECT_NE(dump_journal_message(s, "/var/lib/xen/dump/web01.core").find("; backtrace: vcpu 1 (orc): panic+0x118"),
              std::string::npos);
}

// How the dump was written (issue 18 item 4): format always, compression
// and dump level for a compact file, and its zero pages; a sidecar of an
// older version, without them, reads as v1.
TEST(Sidecar, FormatCompressionAndDumpLevelRoundTrip) {
    TempDir dir;
    Sidecar s;
    s.domain_name = "web01";
    s.dump_file = "web01-7-20231114T221320Z.core";
    EXPECT_NE(s.to_json().find("\"format\": \"v1\""), std::string::npos) << s.to_json();
    EXPECT_EQ(s.to_json().find("dump_level"), std::string::npos);
    EXPECT_EQ(s.to_json().find("zero_pages"), std::string::npos);  // a v1 file has none
    s.format = "kdump";
    s.compression = "zstd";
    s.dump_level = 31;
    s.pages = 19027;
    s.zero_pages = 6448;
    write_sidecar(sidecar_path(dir / s.dump_file), s);
    const Sidecar r = read_sidecar(sidecar_path(dir / s.dump_file));
    EXPECT_EQ(r.format, "kdump");
    EXPECT_EQ(r.compression, std::optional<std::string>("zstd"));
    EXPECT_EQ(r.dump_level, std::optional<unsigned>(31));
    EXPECT_EQ(r.pages, 19027u);
    EXPECT_EQ(r.zero_pages, std::optional<uint64_t>(6448));
    EXPECT_NE(r.to_json().find("\"zero_pages\": 6448"), std::string::npos) << r.to_json();
    EXPECT_EQ(r.to_json(), s.to_json());
    const Sidecar old = Sidecar::from_json(R"({"domain":"web01","result":"ok"})", "old.json");
    EXPECT_EQ(old.format, "v1");
    EXPECT_FALSE(old.dump_level.has_value());
    EXPECT_FALSE(old.zero_pages.has_value());
}

// A consistent live dump's record (issue 35): the pause, the rounds, the
// pages copied again and the restarts, in the sidecar and beside the pause
// in the journal entry; the restarts only when there were some (as
// LIVE_RESTARTS=).
TEST(Sidecar, LiveFieldsRoundTripAndFillTheJournal) {
    TempDir dir;
    Sidecar s;
    s.domain_name = "web01";
    s.dump_file = "web01-7-20231114T221320Z.core";
    s.live = "precopy";
    s.pause_usec = 41210;
    s.live_rounds = 2;
    s.pages_recopied = 5120;
    auto field = [](const LogFields& fields, const std::string& name) -> std::optional<std::string> {
        for (const auto& [k, v] : fields)
            if (k == name) return v;
        return std::nullopt;
    };
    EXPECT_EQ(s.to_json().find("live_restarts"), std::string::npos) << "none: absent";
    EXPECT_FALSE(field(dump_journal_fields(s, dir / s.dump_file), "DUMP_LIVE_RESTARTS"));
    s.live_restarts = 1;
    write_sidecar(sidecar_path(dir / s.dump_file), s);
    const Sidecar r = read_sidecar(sidecar_path(dir / s.dump_file));
    EXPECT_EQ(r.live_restarts, std::optional<unsigned>(1));
    EXPECT_EQ(r.pause_usec, std::optional<uint64_t>(41210));
    EXPECT_NE(r.to_json().find("\"live_restarts\": 1"), std::string::npos) << r.to_json();
    EXPECT_EQ(r.to_json(), s.to_json());
    const LogFields fields = dump_journal_fields(r, dir / s.dump_file);
    EXPECT_EQ(field(fields, "DUMP_PAUSE_USEC"), std::optional<std::string>("41210"));
    EXPECT_EQ(field(fields, "DUMP_LIVE_ROUNDS"), std::optional<std::string>("2"));
    EXPECT_EQ(field(fields, "DUMP_LIVE_RESTARTS"), std::optional<std::string>("1"));
}

TEST(Sidecar, AllOutcomes) {
    for (auto o : {DumpOutcome::ok, DumpOutcome::failed, DumpOutcome::refused, DumpOutcome::cancelled})
        EXPECT_EQ(outcome_from_string(to_string(o)), o);
    EXPECT_THROW(outcome_from_string("fine"), xendump::Error);
}

TEST(Sidecar, DamagedIsRefused) {
    TempDir dir;
    for (const char* text : {"", "[1,2]", "{\"domid\": \"seven\"}", "{\"result\": \"great\"}", "{trunc"}) {
        auto p = dir / "x.core.json";
        std::ofstream(p) << text;
        try {
            read_sidecar(p);
            ADD_FAILURE() << "accepted " << text;
        } catch (const xendump::Error& e) {
            EXPECT_NE(std::string(e.what()).find("x.core.json"), std::string::npos) << e.what();
        }
    }
}

TEST(Sidecar, AnyDomainNameIsKeptByteForByte) {
    TempDir dir;
    const std::vector<std::string> names = {"evil\n\x1b[31mred", "évé", "\xff\xfe not utf-8 \xc3", ".hidden/x"};
    for (size_t i = 0; i < names.size(); ++i) {
        Sidecar s;
        s.domain_name = names[i];
        s.error = "cannot map \xff";  // text around a name is not lost either
        auto p = dir / ("d" + std::to_string(i) + ".core.json");
        write_sidecar(p, s);
        Sidecar r = read_sidecar(p);
        EXPECT_EQ(r.domain_name, names[i]);
        EXPECT_FALSE(r.error.empty());
    }
    // A name that is UTF-8 is written as it is, without a second copy.
    Sidecar plain;
    plain.domain_name = "évé";
    EXPECT_EQ(plain.to_json().find("domain_bytes"), std::string::npos);
    EXPECT_THROW(Sidecar::from_json(R"({"domain_bytes": "4x"})", "t"), xendump::Error);
}
