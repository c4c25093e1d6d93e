// xen-dumpctl list and vacuum on a dump directory written by hand (sidecars
// as JSON text, dumps as plain files): hostile names are escaped, vacuum
// --dry-run removes nothing, vacuum never creates a directory and refuses to
// act on a configuration it could not load.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dump_check.hpp"
#include "test_support.hpp"
#include "xendump/kdump.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;

class CtlService : public ::testing::Test {
protected:
    void SetUp() override {
        fs::create_directory(dumps_);
        config("");
    }
    void config(const std::string& keys) { std::ofstream(config_) << "[Dump]\nKeepFree=0\n" << keys; }
    // A dump of `bytes` and its sidecar; `domain_json` is the JSON text of the name.
    fs::path add_dump(const std::string& file, const std::string& domain_json, const std::string& uuid,
                      const std::string& reason, int64_t start) {
        std::ofstream(dumps_ / file) << std::string(8192, 'x');
        std::ofstream(dumps_ / (file + ".json"))
            << "{\"domain\": " << domain_json << ", \"domid\": 3, \"uuid\": \"" << uuid << "\", \"reason\": \""
            << reason << "\", \"start_time\": " << start << ", \"result\": \"ok\", \"dump_file\": \"" << file
            << "\"}\n";
        return dumps_ / file;
    }
    RunResult ctl(std::vector<std::string> args) {
        args.insert(args.begin(), "xen-dumpctl");
        args.insert(args.end(), {"--config", config_.string(), "--dump-dir", dumps_.string()});
        return run(args);
    }
    TempDir tmp_;
    fs::path dumps_ = tmp_ / "dumps";
    fs::path config_ = tmp_ / "xen-dumpd.conf";
};

TEST_F(CtlService, ListEscapesHostileNames) {
    // A newline, an escape sequence, a C1 CSI and a byte that is not UTF-8.
    add_dump("evil.core", R"("evil\n\u001b[31mred\u009b2J")", "u-1", "crash", 1000);
    std::ofstream(dumps_ / "raw.core.json")
        << "{\"domain\": \"ok\", \"domain_bytes\": \"ff41\", \"start_time\": 2000, \"result\": \"refused\"}\n";
    auto r = ctl({"list"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("evil\\n\\x1b[31mred\\xc2\\x9b2J"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\\xffA"), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3) << "a name forged a line:\n" << r.out;
    // JSON escapes by itself, and a name that is not UTF-8 does not stop it.
    auto j = ctl({"list", "--json"});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    auto parsed = nlohmann::json::parse(j.out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << j.out;
    ASSERT_EQ(parsed.size(), 2u);
    EXPECT_EQ(parsed[0]["domain"], "evil\n\x1b[31mred\xc2\x9b" "2J");
}

// Issue 20 item 3: the guest's panic line, from the sidecar (escaped, cut to
// the column, without its time), and in JSON as it is, with the dmesg file.
TEST_F(CtlService, ListShowsTheGuestsPanicLine) {
    const auto crashed = add_dump("web-3-a.core", "\"web\"", "u-1", "crash", 1000);
    const auto hostile = add_dump("db-4-b.core", "\"db\"", "u-2", "crash", 2000);
    const auto quiet = add_dump("x-5-c.core", "\"x\"", "u-3", "request", 3000);
    auto record = [&](const fs::path& dump, const std::string& panic_json, const std::string& log_json) {
        auto j = nlohmann::json::parse(std::ifstream(dump.string() + ".json"));
        j["guest_panic"] = nlohmann::json::parse(panic_json);
        j["guest_log"] = nlohmann::json::parse(log_json);
        std::ofstream(dump.string() + ".json") << j.dump();
    };
    record(crashed, R"("[    1.978455] Kernel panic - not syncing: testing")",
           R"({"records": 700, "partial": false, "dmesg_file": "web-3-a.core.dmesg.txt"})");
    std::ofstream(crashed.string() + ".dmesg.txt") << "[    1.978455] Kernel panic - not syncing: testing\n";
    record(hostile, R"("[   12.000001] BUG: \u001b[2J\rforged line that goes on and on past the width of the column, far past it")",
           R"({"records": 5, "partial": true})");
    record(quiet, "null", R"({"error": "no VMCOREINFO of a Linux kernel in the dump"})");

    auto r = ctl({"list"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::string header, first, second, third;
    std::getline(lines, header);
    std::getline(lines, first);
    std::getline(lines, second);
    std::getline(lines, third);
    EXPECT_TRUE(header.ends_with("  PANIC")) << header;
    const size_t column = header.find("PANIC");
    EXPECT_EQ(first.substr(column), "Kernel panic - not syncing: testing") << r.out;
    EXPECT_EQ(second.substr(column, 20), "BUG: \\x1b[2J\\rforged") << r.out;
    EXPECT_TRUE(second.ends_with("...")) << second;
    EXPECT_LE(second.size() - column, 60u) << second;
    EXPECT_EQ(third.substr(column), "-") << r.out;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4) << r.out;

    auto j = ctl({"list", "--json"});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    const auto parsed = nlohmann::json::parse(j.out);
    ASSERT_EQ(parsed.size(), 3u);
    EXPECT_EQ(parsed[0]["guest_panic"], "[    1.978455] Kernel panic - not syncing: testing");
    EXPECT_EQ(parsed[0]["dmesg_path"], crashed.string() + ".dmesg.txt");
    EXPECT_EQ(parsed[1]["guest_panic"].get<std::string>().substr(0, 20), "[   12.000001] BUG: ");
    EXPECT_EQ(parsed[1]["dmesg_path"], nullptr);
    EXPECT_EQ(parsed[2]["guest_panic"], nullptr);
    EXPECT_EQ(parsed[2]["dmesg_path"], nullptr);
}

// Issue 18: how each dump was written, in one vocabulary (doc/keys.md):
// the sidecar's format, compression and dump level; for a file without a
// sidecar, what its own headers say (a compact file's header status and sub
// header); null / "-" where neither says.
TEST_F(CtlService, ListSaysHowEachDumpWasWrittenFromItsSidecarElseItsHeaders) {
    const auto compact = add_dump("db-4-a.core", "\"db\"", "u-2", "crash", 1000);
    {
        auto j = nlohmann::json::parse(std::ifstream(compact.string() + ".json"));
        j["format"] = "kdump";
        j["compression"] = "zlib";
        j["dump_level"] = 31;
        std::ofstream(compact.string() + ".json") << j.dump();
    }
    const auto old_sidecar = add_dump("web-3-b.core", "\"web\"", "u-1", "crash", 2000);  // no format: v1
    // Files without sidecars: a v1 file, a compact file (lz4, level 1), not a dump.
    const DumpSpec spec = make_spec(format::GuestType::hvm, 8, 1);
    const auto v1 = dumps_ / "copied-v1.core", kdump = dumps_ / "copied-kdump.core", junk = dumps_ / "junk.core";
    {
        PatternPageSource pages(entries_for(pfns_with_holes(64), format::GuestType::hvm));
        write_dump_file(v1, spec, pages);
    }
    {
        PatternPageSource pages(entries_for(pfns_with_holes(64), format::GuestType::hvm));
        KdumpOptions o;
        o.compression = Compression::lz4;
        o.dump_level = 1;
        write_kdump_file(kdump, spec, pages, o);
    }
    std::ofstream(junk) << std::string(8192, 'x');

    auto j = ctl({"list", "--json"});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    const auto parsed = nlohmann::json::parse(j.out);
    ASSERT_EQ(parsed.size(), 5u) << j.out;
    std::map<std::string, nlohmann::json> by_path;
    for (const auto& e : parsed) by_path[e.at("path").get<std::string>()] = e;
    auto written = [&](const fs::path& p) {
        const auto& e = by_path.at(p.string());
        return std::make_tuple(e.at("format"), e.at("compression"), e.at("dump_level"));
    };
    using nlohmann::json;
    EXPECT_EQ(written(compact), std::make_tuple(json("kdump"), json("zlib"), json(31)));
    EXPECT_EQ(written(old_sidecar), std::make_tuple(json("v1"), json(nullptr), json(nullptr)));
    EXPECT_EQ(written(v1), std::make_tuple(json("v1"), json(nullptr), json(nullptr)));
    EXPECT_EQ(written(kdump), std::make_tuple(json("kdump"), json("lz4"), json(1)));
    EXPECT_EQ(written(junk), std::make_tuple(json(nullptr), json(nullptr), json(nullptr)));
    EXPECT_EQ(by_path.at(kdump.string()).at("sidecar_error"), "no sidecar");

    // The text: one FORMAT column, before FILE.
    auto r = ctl({"list"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::string header;
    std::getline(lines, header);
    const size_t column = header.find("FORMAT"), file_column = header.find("FILE");
    ASSERT_NE(column, std::string::npos) << header;
    ASSERT_LT(column, file_column) << header;
    std::map<std::string, std::string> format_of;
    for (std::string line; std::getline(lines, line);) {
        const std::string file = line.substr(file_column, line.find(' ', file_column) - file_column);
        const std::string cell = line.substr(column, file_column - column);
        format_of[file] = cell.substr(0, cell.find(' '));
    }
    EXPECT_EQ(format_of["db-4-a.core"], "kdump/zlib/d31") << r.out;
    EXPECT_EQ(format_of["web-3-b.core"], "v1") << r.out;
    EXPECT_EQ(format_of["copied-v1.core"], "v1") << r.out;
    EXPECT_EQ(format_of["copied-kdump.core"], "kdump/lz4/d1") << r.out;
    EXPECT_EQ(format_of["junk.core"], "-") << r.out;
    EXPECT_TRUE(header.ends_with("  PANIC")) << header;
}

TEST_F(CtlService, VacuumDryRunRemovesNothing) {
    config("KeepPerDomain=1\n");
    auto older = add_dump("web-3-a.core", "\"web\"", "u-1", "request", 1000);
    auto newer = add_dump("web-3-b.core", "\"web\"", "u-1", "request", 2000);
    auto r = ctl({"vacuum", "--dry-run"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("would remove " + older.string()), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(newer.string()), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(older));
    EXPECT_TRUE(fs::exists(newer));
    auto v = ctl({"vacuum"});
    ASSERT_EQ(v.exit_code, 0) << v.err;
    EXPECT_NE(v.out.find("removed " + older.string()), std::string::npos) << v.out;
    EXPECT_FALSE(fs::exists(older));
    EXPECT_FALSE(fs::exists(older.string() + ".json"));
    EXPECT_TRUE(fs::exists(newer));
}

TEST_F(CtlService, VacuumKeepsTheCrashDumpOverManualOnes) {
    config("KeepPerDomain=2\n");
    auto crash = add_dump("web-3-a.core", "\"web\"", "u-1", "crash", 1000);
    auto manual1 = add_dump("web-3-b.core", "\"web\"", "u-1", "request", 2000);
    auto manual2 = add_dump("web-3-c.core", "\"web\"", "u-1", "request", 3000);
    auto v = ctl({"vacuum"});
    ASSERT_EQ(v.exit_code, 0) << v.err;
    EXPECT_TRUE(fs::exists(crash)) << v.out;
    EXPECT_FALSE(fs::exists(manual1)) << v.out;
    EXPECT_TRUE(fs::exists(manual2)) << v.out;
}

TEST_F(CtlService, VacuumNeverCreatesAMistypedDirectory) {
    auto mistyped = tmp_ / "nonexistent" / "dir";
    auto r = run({"xen-dumpctl", "vacuum", "--config", config_.string(), "--dump-dir", mistyped.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find(mistyped.string()), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp_ / "nonexistent"));
}

TEST_F(CtlService, VacuumRefusesAConfigurationItCannotLoad) {
    config("KeepPerDomain=1\n");
    auto older = add_dump("web-3-a.core", "\"web\"", "u-1", "request", 1000);
    add_dump("web-3-b.core", "\"web\"", "u-1", "request", 2000);
    for (const auto& bad : {tmp_ / "missing.conf", tmp_.path()}) {
        for (const char* verb : {"vacuum", "list"}) {
            auto r = run({"xen-dumpctl", verb, "--config", bad.string(), "--dump-dir", dumps_.string()});
            EXPECT_EQ(r.exit_code, 2) << verb << " " << bad << ": " << r.out << r.err;
            EXPECT_NE(r.err.find(bad.string()), std::string::npos) << r.err;
            EXPECT_EQ(r.out, "") << verb;
        }
    }
    EXPECT_TRUE(fs::exists(older));
}

// Issue 32.7: a configuration that does not parse is not ignored with a
// warning (list then showed the default directory, exit 0, as if the dumps
// were gone): every command that needs it refuses with FILE:LINE, exit 2,
// before reading or removing anything. A FILE operand needs no configuration.
TEST_F(CtlService, ConfigurationThatDoesNotParseStopsEveryCommand) {
    config("MaxAge=1s\nMaxUse=lots\n");  // line 4; MaxAge would remove both dumps
    const auto a = add_dump("web-3-a.core", "\"web\"", "u-1", "request", 1000);
    const auto b = add_dump("web-3-b.core", "\"web\"", "u-1", "crash", 2000);
    const std::vector<std::vector<std::string>> commands = {
        {"list"},          {"list", "--json"},   {"vacuum"},           {"vacuum", "--dry-run"},
        {"status"},        {"cancel", "1"},      {"info", "-1"},       {"info", "web"},
        {"verify", "web"}, {"dmesg", "-1"},      {"estimate", "-1"},   {"backtrace", "-1"},
        {"debug", "--print-command", "-1"},      {"dump", "-o", (tmp_ / "out.core").string(), "-1"},
    };
    for (const auto& args : commands) {
        SCOPED_TRACE(args[0] + (args.size() > 1 ? " " + args[1] : ""));
        auto r = ctl(args);
        EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
        EXPECT_NE(r.err.find(config_.string() + ":4:"), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "");
    }
    EXPECT_TRUE(fs::exists(a));
    EXPECT_TRUE(fs::exists(b));
    EXPECT_FALSE(fs::exists(tmp_ / "out.core"));
    // A FILE is used as given: the configuration is not read (it is not a dump: exit 1).
    auto file = ctl({"info", a.string()});
    EXPECT_EQ(file.exit_code, 1) << file.err;
    EXPECT_EQ(file.err.find(config_.string()), std::string::npos) << file.err;
    // --help is still answered.
    EXPECT_EQ(ctl({"list", "--help"}).exit_code, 0);
}

// xen-dumpctl config (issue 36 item 3): the merged configuration, each value
// with where it came from: a drop-in overriding the main file, a [Domain]
// key, the command line's --dump-dir, and the defaults with their meaning.
TEST_F(CtlService, ConfigShowsEachValueAndWhereItCameFrom) {
    config("MaxParallel=2\n\n[Domain web01]\nFormat=kdump\nDumpLevel=31\n[Upload]\nTarget=s3://bucket/p\n");
    fs::create_directory(tmp_ / "xen-dumpd.conf.d");
    const fs::path drop_in = tmp_ / "xen-dumpd.conf.d" / "10-local.conf";
    std::ofstream(drop_in) << "[Dump]\n# more\nMaxParallel=3\n";
    auto r = ctl({"config", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["files"], nlohmann::json({config_.string(), drop_in.string()}));
    std::map<std::string, nlohmann::json> by_key;
    for (const auto& e : j["settings"]) by_key[e["section"].get<std::string>() + "/" + e["key"].get<std::string>()] = e;
    EXPECT_EQ(by_key["Dump/MaxParallel"]["value"], "3");
    EXPECT_EQ(by_key["Dump/MaxParallel"]["origin"], drop_in.string() + ":3");
    EXPECT_EQ(by_key["Dump/KeepFree"]["origin"], config_.string() + ":2");
    EXPECT_EQ(by_key["Dump/DumpDir"]["value"], dumps_.string());
    EXPECT_EQ(by_key["Dump/DumpDir"]["origin"], "command line (--dump-dir)");
    EXPECT_EQ(by_key["Dump/MaxUse"]["default"], true);
    EXPECT_EQ(by_key["Dump/MaxUse"]["meaning"], "no limit");
    EXPECT_EQ(by_key["Domain web01/Format"]["value"], "kdump");
    EXPECT_EQ(by_key["Domain web01/DumpLevel"]["origin"], config_.string() + ":7");
    EXPECT_EQ(by_key.count("Domain web01/Compress"), 0u);  // not set there: [Dump]'s applies
    // [Upload]'s keys (issue 34), in their own section.
    EXPECT_EQ(by_key["Upload/Target"]["value"], "s3://bucket/p");
    EXPECT_EQ(by_key["Upload/Target"]["origin"], config_.string() + ":9");
    EXPECT_EQ(by_key["Upload/PartSize"]["value"], "16M");
    EXPECT_EQ(by_key["Upload/PartSize"]["default"], true);
    EXPECT_EQ(by_key.count("Dump/Target"), 0u);
    auto text = ctl({"config"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("# " + drop_in.string() + "\n"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("MaxParallel=3"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("# " + drop_in.string() + ":3\n"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("\n[Domain web01]\nFormat=kdump"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("\n[Upload]\nTarget=s3://bucket/p"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("# default: no limit\n"), std::string::npos) << text.out;
    // A configuration that does not load: refused with FILE:LINE, exit 2.
    std::ofstream(drop_in) << "[Dump]\nMaxParallel=lots\n";
    auto bad = ctl({"config"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find(drop_in.string() + ":2"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace xendump::test
