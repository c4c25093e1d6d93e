// The preamble every command of xen-dumpctl shares (ctl/main.cpp
// run_command): the command line is refused (one line, exit 2) before any
// dump is looked for or read, the command's own checks (dump -o, debug
// --debugger) come before the dump too, --help wins over everything but a
// bad option; and the JSON every command prints (ctl/options.hpp
// print_json) holds any file name, UTF-8 or not.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hand_built_dump.hpp"
#include "test_support.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;

bool one_line(const std::string& s) { return std::count(s.begin(), s.end(), '\n') == 1; }

class CtlCommands : public ::testing::Test {
protected:
    void SetUp() override {
        HandBuildSpec spec;
        spec.entries = sample_entries(64, true);
        build_hand_dump(spec).write(dump_);
    }
    TempDir tmp_;
    fs::path dump_ = tmp_ / "hand.core";
    fs::path absent_ = tmp_ / "absent.core";
};

TEST_F(CtlCommands, UsageErrorsComeBeforeTheDumpIsLookedFor) {
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    const Case cases[] = {
        {{"info", "--json=long", absent_.string()}, "--json takes short or pretty, not 'long'"},
        {{"info", absent_.string(), dump_.string()}, "expected one FILE"},
        {{"verify"}, "expected at least one FILE or MATCH"},
        {{"dmesg", "--since", "whenever", absent_.string()}, "whenever"},
        {{"dump", absent_.string()}, "-o FILE is required"},
        {{"debug", "--debugger", "lldb", absent_.string()}, "unknown debugger 'lldb'"},
        {{"bt", "--json=x", absent_.string()}, "--json takes short or pretty"},
        {{"symbol", "--list", "--json", dump_.string()}, "--list takes one FILE and no --json"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> argv = {"xen-dumpctl"};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        SCOPED_TRACE(c.args[0] + " " + c.args[1 % c.args.size()]);
        auto r = run(argv);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_TRUE(one_line(r.err)) << r.err;
        EXPECT_TRUE(r.err.starts_with("xen-dumpctl " + c.args[0] + ": ")) << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("(see 'xen-dumpctl " + c.args[0] + " --help')"), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "");
    }
}

TEST_F(CtlCommands, DumpRefusesAnExistingOutputBeforeReadingTheDump) {
    const fs::path out = tmp_ / "exists.vmcore";
    std::ofstream(out) << "keep me\n";
    auto r = run({"xen-dumpctl", "dump", "-o", out.string(), absent_.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("exists; not replacing it"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("absent.core"), std::string::npos) << r.err;
}

TEST_F(CtlCommands, HelpWinsOverEverythingButABadOption) {
    for (const std::string verb : {"info", "list", "symbol"}) {
        SCOPED_TRACE(verb);
        auto r = run({"xen-dumpctl", verb, "--json=long", "--help"});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_TRUE(r.out.starts_with("usage: xen-dumpctl " + verb + " ")) << r.out;
    }
    // list --help names the dump directory it would list.
    const fs::path dir = tmp_ / "dumps";
    auto l = run({"xen-dumpctl", "list", "--help", "--config", (tmp_ / "none.conf").string(), "--dump-dir",
                  dir.string()});
    EXPECT_EQ(l.exit_code, 0) << l.err;
    EXPECT_NE(l.out.find("List the dumps in the dump directory (" + dir.string() + "), oldest first,"),
              std::string::npos)
        << l.out;
}

// A file name is any bytes: info and estimate --json print it with U+FFFD
// instead of failing (as dmesg, backtrace and list always did).
TEST_F(CtlCommands, JsonOfAFileNameThatIsNotUtf8) {
    const fs::path odd = tmp_ / "guest-\xff.core";
    fs::copy_file(dump_, odd);
    for (const std::string verb : {"info", "estimate"}) {
        for (const std::string style : {"--json", "--json=short"}) {
            SCOPED_TRACE(verb + " " + style);
            auto r = run({"xen-dumpctl", verb, style, odd.string()});
            ASSERT_EQ(r.exit_code, 0) << r.err;
            EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n') == 1, style == "--json=short") << r.out;
            const auto j = nlohmann::json::parse(r.out);
            const std::string file = j.contains("file") ? j["file"] : j["source"];
            EXPECT_EQ(file, (tmp_ / "guest-\xEF\xBF\xBD.core").string());
        }
    }
}

}  // namespace
}  // namespace xendump::test
