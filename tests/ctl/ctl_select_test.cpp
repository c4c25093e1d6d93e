// xen-dumpctl list/info/verify/dmesg selecting dumps as coredumpctl does
// (issue 21): MATCH forms (name, domid, UUID, FIELD=VALUE from the sidecar
// and from the dump's domain note, a file name, a path), -S/-U, -r, -1, -n,
// and MISSING for a recorded dump whose file is gone.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "hand_built_dump.hpp"
#include "test_support.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kUuid3 = "0a1b2c3d-0000-4000-8000-000000000003";
constexpr const char* kUuid4 = "0a1b2c3d-0000-4000-8000-000000000004";

class CtlSelect : public ::testing::Test {
protected:
    void SetUp() override {
        fs::create_directory(dumps_);
        std::ofstream(config_) << "[Dump]\nKeepFree=0\n";
        HandBuildSpec spec;
        spec.entries = sample_entries(64, true);
        dump_ = build_hand_dump(spec);
    }
    // A sidecar for `file`, and (with `with_file`) a real dump file beside it.
    fs::path add(const std::string& file, const std::string& domain, unsigned domid, const std::string& uuid,
                 const std::string& reason, int64_t start, const std::string& result = "ok", bool with_file = true) {
        if (with_file) dump_.write(dumps_ / file);
        json j = {{"domain", domain}, {"domid", domid},   {"uuid", uuid},       {"type", "pv"},
                  {"reason", reason}, {"start_time", start}, {"result", result}, {"dump_file", file}};
        std::ofstream(dumps_ / (file + ".json")) << j.dump() << "\n";
        return dumps_ / file;
    }
    // The three dumps most tests use: web01 crash (1000), web02 request (2000), web01 request (3000).
    void add_three() {
        a_ = add("web01-3-a.core", "web01", 3, kUuid3, "crash", 1000);
        b_ = add("web02-4-b.core", "web02", 4, kUuid4, "request", 2000);
        c_ = add("web01-3-c.core", "web01", 3, kUuid3, "request", 3000);
    }
    RunResult ctl(std::vector<std::string> args) {
        args.insert(args.begin(), "xen-dumpctl");
        args.insert(args.end(), {"--config", config_.string(), "--dump-dir", dumps_.string()});
        return run(args);
    }
    // The dump paths `list --json ARGS` shows, in its order.
    std::vector<std::string> listed(std::vector<std::string> args) {
        args.insert(args.begin(), {"list", "--json"});
        auto r = ctl(args);
        std::vector<std::string> out;
        for (const auto& e : json::parse(r.out)) out.push_back(e["path"].get<std::string>());
        EXPECT_EQ(r.exit_code, out.empty() ? 1 : 0) << r.err;  // 1 when nothing is listed, as coredumpctl
        return out;
    }
    std::string info_file(std::vector<std::string> args) {
        args.insert(args.begin(), {"info", "--json"});
        auto r = ctl(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        if (r.exit_code != 0) return {};
        return json::parse(r.out)["file"].get<std::string>();
    }
    TempDir tmp_;
    fs::path dumps_ = tmp_ / "dumps";
    fs::path config_ = tmp_ / "xen-dumpd.conf";
    HandBuiltDump dump_;
    fs::path a_, b_, c_;
};

using Paths = std::vector<std::string>;

TEST_F(CtlSelect, ListMatchesByNameDomidAndUuid) {
    add_three();
    EXPECT_EQ(listed({}), (Paths{a_, b_, c_}));
    EXPECT_EQ(listed({"web01"}), (Paths{a_, c_}));
    EXPECT_EQ(listed({"4"}), (Paths{b_}));
    EXPECT_EQ(listed({kUuid3}), (Paths{a_, c_}));
    EXPECT_EQ(listed({"0A1B2C3D-0000-4000-8000-000000000004"}), (Paths{b_}));  // UUIDs are case-blind
    EXPECT_EQ(listed({"web03"}), Paths{});
    auto r = ctl({"list", "web03"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("No matching dumps"), std::string::npos) << r.err;
}

// coredumpctl's habits (issue 36 item 2): the commands that read one dump
// take the latest without FILE or MATCH; list exits 1 on an empty
// directory; --no-legend drops the heading; -F prints a field's values,
// each once; -D and --directory name the dump directory; --file FILE takes
// a file by path whatever its name looks like.
// Issue 36 item 5: a MATCH completes as coredumpctl's does: the fields
// (FIELD=), the domains' names, each field's values among the dumps of the
// dump directory given, and dump files of every kind the tools read.
TEST_F(CtlSelect, CompletionOffersFieldsNamesValuesAndDumpFiles) {
    add_three();
    std::ofstream(dumps_ / "old.kdump") << "x";
    std::ofstream(dumps_ / "old.core.age") << "x";
    std::ofstream(dumps_ / "notes.txt") << "x";
    using V = std::vector<std::string>;
    auto complete = [&](V tail) {
        V words = {"xen-dumpctl", "info", "--config", config_.string(), "--dump-dir", dumps_.string()};
        words.insert(words.end(), tail.begin(), tail.end());
        V got = bash_completion("xen-dumpctl", words);
        std::sort(got.begin(), got.end());
        return got;
    };
    const V first = complete({""});
    for (const char* w : {"DOMAIN=", "REASON=", "RESULT=", "TYPE=", "UUID=", "web01", "web02"})
        EXPECT_NE(std::find(first.begin(), first.end(), w), first.end()) << w;
    EXPECT_EQ(complete({"RE"}), (V{"REASON=", "RESULT="}));
    EXPECT_EQ(complete({"REASON", "=", ""}), (V{"crash", "request"}));
    EXPECT_EQ(complete({"DOMAIN", "=", "web0"}), (V{"web01", "web02"}));
    EXPECT_EQ(complete({"reason", "=", "c"}), (V{"crash"}));
    EXPECT_EQ(complete({"UUID", "="}), (V{kUuid3, kUuid4}));
    const std::string dir = dumps_.string() + "/";
    EXPECT_EQ(complete({dir}), (V{dir + "old.core.age", dir + "old.kdump", dir + "web01-3-a.core",
                                  dir + "web01-3-c.core", dir + "web02-4-b.core"}));
}

// Issue 34 item 5: SIGNATURE= selects the dumps of one crash, whatever host
// or boot wrote them (their panic lines' times and the frames' offsets
// differ), and list --json shows each dump's crash_signature.
TEST_F(CtlSelect, SignatureSelectsTheDumpsOfOneCrash) {
    auto crashed = [&](const std::string& file, const std::string& panic, const json& frames, int64_t start) {
        const fs::path dump = add(file, "web01", 3, kUuid3, "crash", start);
        json j = json::parse(slurp_text(dump.string() + ".json"));
        j["guest_panic"] = panic;
        j["guest_backtrace"] = {{"vcpu", 0}, {"method", "orc"}, {"frames", frames}};
        std::ofstream(dump.string() + ".json") << j.dump() << "\n";
        return dump;
    };
    const fs::path a = crashed("web01-3-a.core", "[    8.197049] Kernel panic - not syncing: sysrq triggered crash",
                               {"panic+0x286", "sysrq_handle_crash+0x16"}, 1000);
    const fs::path b = crashed("web01-3-b.core", "[ 4711.5] Kernel panic - not syncing: sysrq triggered crash",
                               {"panic+0x2a6/0x3c0", "sysrq_handle_crash+0x1a"}, 2000);
    const fs::path c = crashed("web01-3-c.core", "[    3.1] Kernel panic - not syncing: Fatal exception",
                               {"panic+0x286", "die+0x40"}, 3000);
    add("web01-3-d.core", "web01", 3, kUuid3, "request", 4000);  // no panic: no signature
    auto r = ctl({"list", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json all = json::parse(r.out);
    ASSERT_EQ(all.size(), 4u);
    const std::string sig = all[0]["crash_signature"].get<std::string>();
    EXPECT_EQ(all[1]["crash_signature"], sig);
    EXPECT_NE(all[2]["crash_signature"], sig);
    EXPECT_TRUE(all[3]["crash_signature"].is_null());
    EXPECT_EQ(listed({"SIGNATURE=" + sig}), (std::vector<std::string>{a.string(), b.string()}));
    std::string upper = sig;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    EXPECT_EQ(listed({"signature=" + upper}).size(), 2u);
    EXPECT_EQ(listed({"SIGNATURE=" + all[2]["crash_signature"].get<std::string>()}),
              (std::vector<std::string>{c.string()}));
    // --group-by signature: one line a crash, as crash collectors' buckets.
    auto grouped = ctl({"list", "--group-by", "signature", "--json"});
    ASSERT_EQ(grouped.exit_code, 0) << grouped.err;
    const json groups = json::parse(grouped.out);
    ASSERT_EQ(groups.size(), 2u) << grouped.out;
    EXPECT_EQ(groups[0]["value"], sig);
    EXPECT_EQ(groups[0]["count"], 2);
    EXPECT_EQ(groups[0]["first_time"], 1000);
    EXPECT_EQ(groups[0]["last_time"], 2000);
    EXPECT_EQ(groups[0]["domains"], json::array({"web01"}));
    EXPECT_EQ(groups[0]["guest_panic"], "[ 4711.5] Kernel panic - not syncing: sysrq triggered crash");
    EXPECT_EQ(groups[1]["count"], 1);
    auto table = ctl({"list", "--group-by", "SIGNATURE", "--utc"});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_EQ(table.out.substr(0, 9), "SIGNATURE") << table.out;
    EXPECT_NE(table.out.find(sig + " "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("Kernel panic - not syncing: Fatal exception"), std::string::npos) << table.out;
    EXPECT_EQ(ctl({"list", "--group-by", "signature", "web02"}).exit_code, 1);
    auto values = ctl({"list", "-F", "SIGNATURE"});
    EXPECT_EQ(values.out, sig + "\n" + all[2]["crash_signature"].get<std::string>() + "\n") << values.err;
}

TEST_F(CtlSelect, CoredumpctlHabits) {
    auto none = run({"xen-dumpctl", "list", "--config", config_.string(), "-D", dumps_.string()});
    EXPECT_EQ(none.exit_code, 1) << none.out << none.err;
    EXPECT_NE(none.err.find("No dumps in"), std::string::npos) << none.err;
    add_three();
    EXPECT_EQ(info_file({}), c_.string());                   // the latest
    EXPECT_EQ(info_file({"web02"}), b_.string());
    for (const char* verb : {"dmesg", "backtrace", "estimate"}) {
        // They read the latest dump (a hand-built one: no kernel found, so no
        // log or backtrace; what matters is the file they name).
        auto r = ctl({verb});
        EXPECT_EQ(r.err.find("expected a FILE"), std::string::npos) << verb << ": " << r.err;
    }
    auto dump = ctl({"dump", "-o", (tmp_ / "vmcore").string()});
    EXPECT_EQ(dump.err.find("expected a FILE"), std::string::npos) << dump.err;
    auto verify = ctl({"verify"});
    EXPECT_EQ(verify.exit_code, 2) << verify.err;  // verify still wants what to check
    auto legend = ctl({"list"});
    auto bare = ctl({"list", "--no-legend"});
    ASSERT_EQ(legend.exit_code, 0) << legend.err;
    ASSERT_EQ(bare.exit_code, 0) << bare.err;
    EXPECT_EQ(legend.out.substr(0, 5), "TIME ");
    // The same rows without the heading (columns may be narrower without it).
    auto squeezed = [](std::string t) {
        std::string out;
        for (char ch : t)
            if (ch != ' ' || (!out.empty() && out.back() != ' ')) out += ch;
        return out;
    };
    EXPECT_EQ(squeezed(legend.out.substr(legend.out.find('\n') + 1)), squeezed(bare.out));
    EXPECT_EQ(bare.out.find("TIME"), std::string::npos) << bare.out;
    EXPECT_EQ(std::count(bare.out.begin(), bare.out.end(), '\n'), 3);
    auto domains = ctl({"list", "-F", "domain"});
    EXPECT_EQ(domains.exit_code, 0) << domains.err;
    EXPECT_EQ(domains.out, "web01\nweb02\n");
    EXPECT_EQ(ctl({"list", "--field", "REASON", "web01"}).out, "crash\nrequest\n");
    EXPECT_EQ(ctl({"list", "-F", "reason", "web03"}).exit_code, 1);
    EXPECT_EQ(ctl({"list", "-F", "no such"}).exit_code, 2);
    auto dir = run({"xen-dumpctl", "list", "--json", "--config", config_.string(), "--directory", dumps_.string()});
    EXPECT_EQ(json::parse(dir.out).size(), 3u) << dir.err;
    // --file: a dump file by its path (here one named like a domain).
    const fs::path odd = tmp_ / "web02";
    dump_.write(odd);
    auto byfile = run({"xen-dumpctl", "info", "--json", "--config", config_.string(), "-D", dumps_.string(),
                       "--file", odd.string()});
    ASSERT_EQ(byfile.exit_code, 0) << byfile.err;
    EXPECT_EQ(json::parse(byfile.out)["file"], odd.string());
}

// Times are shown in local time unless --utc, and -S/-U are read the same
// way (TZ fixed for the test; "UTC"/"Z" after a time always means UTC).
TEST_F(CtlSelect, LocalTimesAndUtc) {
    add_three();  // 1000, 2000, 3000 seconds after the epoch
    ScopedEnv tz("TZ", "CET-1CEST");
    auto local = ctl({"list", "--no-legend", "-1"});
    auto utc = ctl({"list", "--no-legend", "-1", "--utc"});
    EXPECT_EQ(local.out.substr(0, 23), "1970-01-01 01:50:00 CET") << local.out;
    EXPECT_EQ(utc.out.substr(0, 23), "1970-01-01 00:50:00 UTC") << utc.out;
    // 00:40 local is 23:40 UTC the day before: before every dump; 00:40 UTC is between the first two.
    EXPECT_EQ(listed({"--since", "1970-01-01 00:40"}), (Paths{a_, b_, c_}));
    EXPECT_EQ(listed({"--since", "1970-01-01 00:40", "--utc"}), (Paths{c_}));
    EXPECT_EQ(listed({"--since", "1970-01-01 00:40 UTC"}), (Paths{c_}));
    EXPECT_EQ(listed({"--until", "1970-01-01 01:20"}), (Paths{a_}));
}

// --json=short prints one line, --json=pretty what plain --json prints
// (indented); another value is a usage error (list and info alike).
TEST_F(CtlSelect, JsonShortAndPretty) {
    add_three();
    auto plain = ctl({"list", "--json"});
    auto pretty = ctl({"list", "--json=pretty"});
    auto shorter = ctl({"list", "--json=short"});
    ASSERT_EQ(shorter.exit_code, 0) << shorter.err;
    EXPECT_EQ(pretty.out, plain.out);
    EXPECT_GT(std::count(plain.out.begin(), plain.out.end(), '\n'), 3);
    EXPECT_EQ(std::count(shorter.out.begin(), shorter.out.end(), '\n'), 1) << shorter.out;
    EXPECT_EQ(json::parse(shorter.out), json::parse(plain.out));
    auto info = ctl({"info", "--json=short", "web02"});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    EXPECT_EQ(std::count(info.out.begin(), info.out.end(), '\n'), 1);
    EXPECT_EQ(json::parse(info.out)["file"], b_.string());
    auto bad = ctl({"list", "--json=wide"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--json takes short or pretty, not 'wide'"), std::string::npos) << bad.err;
}

TEST_F(CtlSelect, ListMatchesFieldsOfTheSidecarAndTheNote) {
    add_three();
    EXPECT_EQ(listed({"REASON=crash"}), (Paths{a_}));
    EXPECT_EQ(listed({"DOMAIN=web02"}), (Paths{b_}));
    EXPECT_EQ(listed({"name=web02"}), (Paths{b_}));  // NAME is DOMAIN; field names are case-blind
    EXPECT_EQ(listed({"DOMID=03"}), (Paths{a_, c_}));
    EXPECT_EQ(listed({"TYPE=PV"}), (Paths{a_, b_, c_}));
    EXPECT_EQ(listed({"FILE=web02-4-b.core"}), (Paths{b_}));
    EXPECT_EQ(listed({"web02-4-b.core"}), (Paths{b_}));  // a file name of the dump directory
    EXPECT_EQ(listed({b_.string()}), (Paths{b_}));       // a path
    // Same field: alternatives; different fields: all must hold.
    EXPECT_EQ(listed({"web01", "web02"}), (Paths{a_, b_, c_}));
    EXPECT_EQ(listed({"web01", "web02", "REASON=request"}), (Paths{b_, c_}));
    EXPECT_EQ(listed({"web01", "4"}), Paths{});
    // Not in the sidecar: read from the dump's NT_XEN_DOMAIN note.
    EXPECT_EQ(listed({"WRITER=hand_built_dump", "web02"}), (Paths{b_}));
    EXPECT_EQ(listed({"WRITER=someone-else"}), Paths{});
    auto bad = ctl({"list", "9X=1"});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("9X=1"), std::string::npos) << bad.err;
}

TEST_F(CtlSelect, DumpWithoutSidecarMatchesByItsNote) {
    dump_.write(dumps_ / "other-tool.core");
    const std::string path = (dumps_ / "other-tool.core").string();
    EXPECT_EQ(listed({"hand-built"}), (Paths{path}));
    EXPECT_EQ(listed({"7"}), (Paths{path}));
    EXPECT_EQ(listed({"00000000-0000-0000-0000-000000000007"}), (Paths{path}));
    EXPECT_EQ(listed({"RESULT=ok"}), Paths{});  // never recorded
    EXPECT_EQ(info_file({"hand-built"}), path);
}

TEST_F(CtlSelect, ListSinceAndUntil) {
    add_three();
    EXPECT_EQ(listed({"--since", "1970-01-01 00:25"}), (Paths{b_, c_}));  // 1500
    EXPECT_EQ(listed({"-S", "@2000"}), (Paths{b_, c_}));                   // inclusive
    EXPECT_EQ(listed({"--until=1970-01-01T00:33:20Z"}), (Paths{a_, b_}));  // 2000, inclusive
    EXPECT_EQ(listed({"-U@1999"}), (Paths{a_}));
    EXPECT_EQ(listed({"-S", "@1500", "-U", "@2500", "web01"}), Paths{});
    EXPECT_EQ(listed({"--since", "yesterday"}), Paths{});  // all in 1970
    auto r = ctl({"list", "--since", "the day before"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("'the day before'"), std::string::npos) << r.err;
}

TEST_F(CtlSelect, ListSinceRelativeToNow) {
    const int64_t now = std::time(nullptr);
    auto old = add("web01-3-old.core", "web01", 3, kUuid3, "crash", now - 3 * 3600);
    auto recent = add("web01-3-new.core", "web01", 3, kUuid3, "crash", now - 600);
    EXPECT_EQ(listed({"-S", "-1h"}), (Paths{recent}));
    EXPECT_EQ(listed({"-S", "-4h"}), (Paths{old, recent}));
    EXPECT_EQ(listed({"-U", "-30min"}), (Paths{old}));
    EXPECT_EQ(listed({"-U", "2h ago", "-S", "-1d"}), (Paths{old}));
}

TEST_F(CtlSelect, ListReverseLatestAndLatestN) {
    add_three();
    EXPECT_EQ(listed({"-r"}), (Paths{c_, b_, a_}));
    EXPECT_EQ(listed({"--reverse", "web01"}), (Paths{c_, a_}));
    EXPECT_EQ(listed({"-1"}), (Paths{c_}));
    EXPECT_EQ(listed({"-1", "web02"}), (Paths{b_}));
    EXPECT_EQ(listed({"-n", "2"}), (Paths{b_, c_}));
    EXPECT_EQ(listed({"-n2", "-r"}), (Paths{c_, b_}));
    EXPECT_EQ(listed({"-n", "9"}), (Paths{a_, b_, c_}));
    EXPECT_EQ(ctl({"list", "-n", "0"}).exit_code, 2);
    EXPECT_EQ(ctl({"list", "-n", "x"}).exit_code, 2);
    EXPECT_EQ(ctl({"list", "-n"}).exit_code, 2);
    // The text table in the same order.
    auto r = ctl({"list", "-r"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_LT(r.out.find("web01-3-c.core"), r.out.find("web01-3-a.core")) << r.out;
}

TEST_F(CtlSelect, ListShowsMissingForARecordedDumpWhoseFileIsGone) {
    add_three();
    fs::remove(b_);
    add("web05-9-refused.core", "web05", 9, "", "crash", 4000, "refused", false);
    auto r = ctl({"list"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string b_line, refused_line;
    std::istringstream lines(r.out);
    for (std::string l; std::getline(lines, l);) {
        if (l.find("web02") != std::string::npos) b_line = l;
        if (l.find("web05") != std::string::npos) refused_line = l;
    }
    EXPECT_NE(b_line.find("MISSING"), std::string::npos) << r.out;
    EXPECT_NE(b_line.find("web02-4-b.core"), std::string::npos) << r.out;
    EXPECT_EQ(b_line.find("ok"), std::string::npos) << r.out;
    // A refused dump never had a file: not missing.
    EXPECT_NE(refused_line.find("refused"), std::string::npos) << r.out;
    EXPECT_EQ(refused_line.find("MISSING"), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5) << r.out;
    auto j = json::parse(ctl({"list", "--json"}).out);
    ASSERT_EQ(j.size(), 4u);
    EXPECT_EQ(j[1]["missing"], true);
    EXPECT_EQ(j[1]["present"], false);
    EXPECT_EQ(j[0]["missing"], false);
    EXPECT_EQ(j[3]["missing"], false);
    EXPECT_EQ(listed({"RESULT=missing"}), (Paths{b_}));
}

TEST_F(CtlSelect, InfoActsOnTheLatestMatch) {
    add_three();
    EXPECT_EQ(info_file({"web01"}), c_);
    EXPECT_EQ(info_file({"-1"}), c_);
    EXPECT_EQ(info_file({"web01", "-U", "@2500"}), a_);
    EXPECT_EQ(info_file({"REASON=crash"}), a_);
    EXPECT_EQ(info_file({"4"}), b_);
    // The latest that has a file.
    fs::remove(c_);
    EXPECT_EQ(info_file({"web01"}), a_);
    fs::remove(b_);
    auto gone = ctl({"info", "web02"});
    EXPECT_EQ(gone.exit_code, 1);
    EXPECT_NE(gone.err.find(b_.string()), std::string::npos) << gone.err;
    EXPECT_NE(gone.err.find("missing"), std::string::npos) << gone.err;
    auto none = ctl({"info", "nobody"});
    EXPECT_EQ(none.exit_code, 1);
    EXPECT_NE(none.err.find("no dump matches DOMAIN=nobody"), std::string::npos) << none.err;
    // A FILE still works as before, the dump directory unused; no MATCH means
    // the latest dump (coredumpctl's habit), here a_, the only one with a file.
    auto direct = run({"xen-dumpctl", "info", "--json", a_.string()});
    ASSERT_EQ(direct.exit_code, 0) << direct.err;
    EXPECT_EQ(json::parse(direct.out)["file"], a_.string());
    EXPECT_EQ(info_file({}), a_.string());
    EXPECT_EQ(run({"xen-dumpctl", "info", a_.string(), a_.string()}).exit_code, 2);
}

TEST_F(CtlSelect, DmesgActsOnTheLatestMatch) {
    add_three();
    // The hand-built dumps hold no kernel: the error names the file selected.
    auto r = ctl({"dmesg", "web01"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(c_.string() + ": no VMCOREINFO"), std::string::npos) << r.err;
    auto older = ctl({"dmesg", "-U", "@1000"});
    EXPECT_NE(older.err.find(a_.string() + ": no VMCOREINFO"), std::string::npos) << older.err;
}

TEST_F(CtlSelect, VerifyChecksEverySelectedDumpAndFailsOnAMissingOne) {
    add_three();
    auto all = ctl({"verify", "--quiet", "web01"});
    EXPECT_EQ(all.exit_code, 0) << all.out << all.err;
    auto ok = ctl({"verify", "web01"});
    EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
    EXPECT_NE(ok.out.find(a_.string() + ": OK"), std::string::npos) << ok.out;
    EXPECT_NE(ok.out.find(c_.string() + ": OK"), std::string::npos) << ok.out;
    EXPECT_EQ(ok.out.find(b_.string()), std::string::npos) << ok.out;
    auto latest = ctl({"verify", "-1", "web01"});
    EXPECT_EQ(latest.exit_code, 0) << latest.err;
    EXPECT_EQ(latest.out.find(a_.string()), std::string::npos) << latest.out;
    EXPECT_NE(latest.out.find(c_.string() + ": OK"), std::string::npos) << latest.out;
    fs::remove(a_);
    auto missing = ctl({"verify", "web01"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.out.find(a_.string() + ": missing"), std::string::npos) << missing.out;
    EXPECT_NE(missing.out.find(c_.string() + ": OK"), std::string::npos) << missing.out;
    EXPECT_EQ(ctl({"verify", "nobody"}).exit_code, 1);
}

}  // namespace
}  // namespace xendump::test
