// The option tables of the four programs (issue 21 item 3), row by row:
// every row is in the program's man page and offered by its bash completion
// (for xen-dumpctl: by the completion of its command), every option of a man
// page is a row, every row parses as --opt=V and --opt V (and -xV, -x V,
// -x=V) in the shared parser and in the program itself, and a bad command
// line is one line naming the option, pointing to --help, exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_options.hpp"
#include "man_options.hpp"
#include "test_support.hpp"

// The tables, as the programs include them.
#include "../../convert/options_table.hpp"
#include "../../ctl/option_tables.hpp"
#include "../../daemon/options_table.hpp"
#include "../../sim/options_table.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
using cli::Arg;
using cli::Option;

struct Table {
    std::string program;
    std::string verb;  // xen-dumpctl's command, "" for the program itself
    std::vector<Option> rows;
    std::string man;   // the page under man/
    std::string label() const { return verb.empty() ? program : program + " " + verb; }
    // argv up to the options: the program and its command.
    std::vector<std::string> prefix() const {
        std::vector<std::string> a = {program};
        if (!verb.empty()) a.push_back(verb);
        return a;
    }
};

std::vector<Table> tables() {
    auto rows = [](std::span<const Option> t) { return std::vector<Option>(t.begin(), t.end()); };
    std::vector<Table> out = {
        {"xen-dumpd", "", rows(daemon::kDaemonOptions), "xen-dumpd.8"},
        {"xen-dump-convert", "", rows(convert::kConvertOptions), "xen-dump-convert.1"},
        {"xen-dump-sim", "", rows(sim::kSimOptions), "xen-dump-sim.1"},
        {"xen-dumpctl", "", rows(ctl::kTopOptions), "xen-dumpctl.1"},
    };
    for (const auto& v : ctl::verb_tables()) out.push_back({"xen-dumpctl", std::string(v.verb), v.options, "xen-dumpctl.1"});
    return out;
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<std::string> spellings(const Option& o) {
    std::vector<std::string> out;
    if (!o.name.empty()) out.push_back(o.long_spelling());
    if (o.letter) out.push_back(o.short_spelling());
    return out;
}

// What the bash completion offers after PROGRAM [VERB] when the word typed is "-".
std::set<std::string> completion_offers(const Table& t) {
    std::vector<std::string> words = {t.program};
    if (!t.verb.empty()) words.push_back(t.verb);
    words.push_back("-");
    std::set<std::string> out;
    for (const auto& w : bash_completion(t.program, words)) out.insert(w);
    return out;
}

char** argv_of(std::vector<std::string>& words, std::vector<char*>& storage) {
    storage.clear();
    for (auto& w : words) storage.push_back(w.data());
    storage.push_back(nullptr);
    return storage.data();
}

cli::Parsed parse_words(std::span<const Option> table, std::vector<std::string> words) {
    words.insert(words.begin(), "prog");
    std::vector<char*> storage;
    char** argv = argv_of(words, storage);
    return cli::parse(table, static_cast<int>(words.size()), argv);
}

TEST(OptionTables, EveryRowIsInTheManPageAndTheCompletion) {
    for (const auto& t : tables()) {
        SCOPED_TRACE(t.label());
        const auto documented = options_in_mdoc(read_text(source_root() / "man" / t.man));
        const auto offered = completion_offers(t);
        EXPECT_FALSE(offered.empty());
        for (const auto& o : cli::with_help(t.rows)) {
            for (const auto& s : spellings(o)) {
                EXPECT_TRUE(documented.contains(s)) << t.man << " does not document " << s;
                EXPECT_TRUE(offered.contains(s)) << "the completion of " << t.label() << " does not offer " << s;
                // A value in the table is a value in the page (--json[=...] is optional: either).
                if (documented.contains(s) && o.arg == Arg::required) {
                    EXPECT_TRUE(documented.at(s)) << t.man << " shows " << s << " without its " << o.value;
                }
            }
        }
    }
}

TEST(OptionTables, EveryOptionOfAManPageIsARow) {
    for (const std::string program : {"xen-dumpd", "xen-dump-convert", "xen-dump-sim", "xen-dumpctl"}) {
        std::set<std::string> rows;
        std::string man;
        for (const auto& t : tables()) {
            if (t.program != program) continue;
            man = t.man;
            for (const auto& o : cli::with_help(t.rows))
                for (const auto& s : spellings(o)) rows.insert(s);
        }
        for (const auto& [option, takes_value] : options_in_mdoc(read_text(source_root() / "man" / man)))
            EXPECT_TRUE(rows.contains(option)) << man << " documents " << option << ", no table of " << program
                                               << " has it";
    }
}

TEST(OptionTables, EveryCommandOfTheCompletionHasATable) {
    // The completion's command list against verb_tables().
    const std::string script = read_text(source_root() / "completions" / "xen-dumpctl");
    const auto at = script.find("local commands='");
    ASSERT_NE(at, std::string::npos);
    std::istringstream in(script.substr(at + 16, script.find('\'', at + 16) - at - 16));
    std::set<std::string> completed;
    for (std::string w; in >> w;) completed.insert(w);
    std::set<std::string> verbs;
    for (const auto& v : ctl::verb_tables()) verbs.insert(std::string(v.verb));
    EXPECT_EQ(completed, verbs);
}

// Issue 36 item 5: xen-dumpd --domain completes the domains of the host it
// is given, a simulated one too (--host sim:DIR, as bash splits it at ':',
// or XEN_DUMP_HOST), by name and by id.
TEST(Completion, XenDumpdOffersTheDomainsOfASimulatedHost) {
    TempDir dir;
    const fs::path spec = dir / "spec.json", host = dir / "host";
    std::ofstream(spec) << R"({"xen_version": "4.17.0", "domains": [
        {"domid": 7, "name": "web01", "uuid": "0d5e9a3c-1f2b-4c6d-8e9f-a0b1c2d3e4f5", "type": "hvm", "vcpus": 1,
         "p2m_size": 256, "extents": [[0, 4194304, 256]], "memory": {"fill": "pattern"}, "state": "running"},
        {"domid": 9, "name": "db01", "uuid": "5b7c1e2a-3d4f-4a6b-9c8d-e0f1a2b3c4d5", "type": "pv", "guest_width": 8,
         "vcpus": 1, "p2m_size": 256, "p2m_format": "tree", "extents": [[0, 1048576, 256]],
         "memory": {"fill": "pattern"}, "state": "running"}]})";
    auto made = run({"xen-dump-sim", "create", host.string(), spec.string()});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    using V = std::vector<std::string>;
    auto sorted = [](V v) {
        std::sort(v.begin(), v.end());
        return v;
    };
    EXPECT_EQ(sorted(bash_completion("xen-dumpd", {"xen-dumpd", "--host", "sim", ":", host.string(), "--domain", ""})),
              (V{"7", "9", "db01", "web01"}));
    EXPECT_EQ(bash_completion("xen-dumpd", {"xen-dumpd", "--host", "sim:" + host.string(), "--domain", "w"}),
              V{"web01"});
    EXPECT_EQ(bash_completion("xen-dumpd", {"xen-dumpd", "--domain", "d"}, {"XEN_DUMP_HOST=sim:" + host.string()}),
              V{"db01"});
}

// The shared parser: each row with --opt=V, --opt V, -xV, -x V, -x=V; flags alone.
TEST(OptionTables, EveryRowParsesInEverySpelling) {
    for (const auto& t : tables()) {
        SCOPED_TRACE(t.label());
        for (const auto& o : t.rows) {
            const std::string id = o.spelling();
            std::vector<std::vector<std::string>> forms;
            if (o.arg == Arg::none) {
                for (const auto& s : spellings(o)) forms.push_back({s, "operand"});
            } else {
                if (!o.name.empty()) {
                    forms.push_back({o.long_spelling() + "=v-1", "operand"});
                    if (o.arg == Arg::required) forms.push_back({o.long_spelling(), "v-1", "operand"});
                }
                if (o.letter) {
                    forms.push_back({o.short_spelling() + "v-1", "operand"});
                    if (o.arg == Arg::required) {
                        forms.push_back({o.short_spelling(), "v-1", "operand"});
                        forms.push_back({o.short_spelling() + "=v-1", "operand"});
                    }
                }
            }
            for (const auto& f : forms) {
                SCOPED_TRACE(f[0]);
                cli::Parsed p;
                ASSERT_NO_THROW(p = parse_words(t.rows, f));
                EXPECT_TRUE(p.has(id));
                if (o.arg != Arg::none) {
                    EXPECT_EQ(p.value(id), "v-1");
                }
                EXPECT_EQ(p.operands, std::vector<std::string>{"operand"});
            }
        }
    }
}

// The programs themselves: every row accepted in both long forms (--help
// after it answers, exit 0), and a flag given a value refused.
TEST(OptionTables, EveryProgramAcceptsEveryRowBothWays) {
    for (const auto& t : tables()) {
        SCOPED_TRACE(t.label());
        for (const auto& o : t.rows) {
            std::vector<std::vector<std::string>> forms;
            const std::string s = o.spelling();
            if (o.arg == Arg::none) {
                forms.push_back({s});
            } else if (o.name.empty()) {
                forms.push_back({s, "1"});
                forms.push_back({s + "1"});
            } else {
                forms.push_back({s + "=1"});
                if (o.arg == Arg::required) forms.push_back({s, "1"});
            }
            for (auto f : forms) {
                auto argv = t.prefix();
                argv.insert(argv.end(), f.begin(), f.end());
                argv.push_back("--help");
                auto r = run(argv);
                EXPECT_EQ(r.exit_code, 0) << f[0] << ": " << r.err;
                EXPECT_NE(r.out.find(s), std::string::npos) << "--help of " << t.label() << " does not show " << s;
            }
            if (o.arg == Arg::none && !o.name.empty()) {
                auto argv = t.prefix();
                argv.push_back(s + "=1");
                auto r = run(argv);
                EXPECT_EQ(r.exit_code, 2) << s << "=1: " << r.out << r.err;
                EXPECT_NE(r.err.find("'" + s + "' takes no value"), std::string::npos) << r.err;
            }
        }
    }
}

// --help is made from the table: each row's first help line is in it.
TEST(OptionTables, HelpShowsEveryRowsText) {
    for (const auto& t : tables()) {
        SCOPED_TRACE(t.label());
        auto argv = t.prefix();
        argv.push_back("--help");
        auto r = run(argv);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        for (const auto& o : t.rows) {
            const std::string first(o.help.substr(0, o.help.find('\n')));
            EXPECT_NE(r.out.find(first), std::string::npos) << t.label() << " --help lacks: " << first << "\n" << r.out;
        }
    }
}

bool one_line(const std::string& s) { return std::count(s.begin(), s.end(), '\n') == 1; }

// Each command of xen-dumpctl answers --help from its row of verb_tables():
// exit 0, "usage: " and the row's usage as the first lines, then its text;
// an unknown option (even with --help after it) is one usage line, exit 2,
// nothing on stdout.
TEST(OptionTables, EveryCommandsHelpStartsWithItsUsage) {
    for (const auto& v : ctl::verb_tables()) {
        const std::string verb(v.verb), usage(v.usage);
        SCOPED_TRACE(verb);
        const std::string first_line = usage.substr(0, usage.find('\n'));
        EXPECT_TRUE(first_line.starts_with("xen-dumpctl " + verb + " ") ||
                    usage.find("(" + verb + " is short for ") != std::string::npos)
            << usage;
        auto r = run({"xen-dumpctl", verb, "--help"});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_TRUE(r.out.starts_with("usage: " + usage + "\n\n")) << r.out;
        const std::string text(v.help.substr(0, v.help.find('\n')));
        EXPECT_NE(r.out.find(text.substr(0, text.find('{'))), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("{dump_dir}"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("MATCH selects dumps") != std::string::npos, v.selects()) << r.out;
        auto bad = run({"xen-dumpctl", verb, "--no-such-option", "--help"});
        EXPECT_EQ(bad.exit_code, 2);
        EXPECT_TRUE(one_line(bad.err)) << bad.err;
        EXPECT_EQ(bad.err, "xen-dumpctl " + verb + ": unknown option '--no-such-option' (see 'xen-dumpctl " + verb +
                               " --help')\n");
        EXPECT_EQ(bad.out, "");
    }
}

TEST(OptionTables, UsageErrorsAreOneLineNamingTheOptionExitTwo) {
    for (const auto& t : tables()) {
        SCOPED_TRACE(t.label());
        auto argv = t.prefix();
        argv.push_back("--no-such-option");
        auto r = run(argv);
        EXPECT_EQ(r.exit_code, 2);
        EXPECT_TRUE(one_line(r.err)) << r.err;
        EXPECT_NE(r.err.find("unknown option '--no-such-option'"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("see '" + t.label() + " --help'"), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "");
        // An option that wants a value, given none.
        for (const auto& o : t.rows) {
            if (o.arg != Arg::required) continue;
            auto a = t.prefix();
            a.push_back(o.spelling());
            auto m = run(a);
            EXPECT_EQ(m.exit_code, 2) << o.spelling();
            EXPECT_TRUE(one_line(m.err)) << m.err;
            EXPECT_NE(m.err.find("option '" + o.spelling() + "' needs a value"), std::string::npos) << m.err;
        }
        // An unknown short option in a cluster.
        auto c = t.prefix();
        c.push_back("-%");
        auto s = run(c);
        EXPECT_EQ(s.exit_code, 2);
        EXPECT_NE(s.err.find("unknown option '-%'"), std::string::npos) << s.err;
    }
}

TEST(SharedParser, ClustersDashDashAndShortEquals) {
    auto p = parse_words(convert::kConvertOptions, {"-nqj4", "in", "--", "--json", "-q"});
    EXPECT_TRUE(p.has("--dry-run"));
    EXPECT_TRUE(p.has("-q"));
    EXPECT_EQ(p.value("--jobs"), "4");
    EXPECT_FALSE(p.has("--json"));
    EXPECT_EQ(p.operands, (std::vector<std::string>{"in", "--json", "-q"}));
    // -o=/dev/null as people type it; a separate "=x" stays a value.
    EXPECT_EQ(parse_words(daemon::kDaemonOptions, {"-o=/dev/null"}).value("-o"), "/dev/null");
    EXPECT_EQ(parse_words(daemon::kDaemonOptions, {"-o", "=x"}).value("-o"), "=x");
    EXPECT_EQ(parse_words(daemon::kDaemonOptions, {"--output==x"}).value("-o"), "=x");
    // The last value wins; values() keeps them all; a value may start with '-'.
    auto d = parse_words(ctl::verb_options("debug"), {"-A", "-s", "-A-x", "--since", "-2h", "x"});
    EXPECT_EQ(d.values("-A"), (std::vector<std::string>{"-s", "-x"}));
    EXPECT_EQ(d.value("-S"), "-2h");
    // -1 is an option of the selection, "-" an operand.
    auto l = parse_words(ctl::verb_options("list"), {"-1r", "-"});
    EXPECT_TRUE(l.has("-1"));
    EXPECT_TRUE(l.has("--reverse"));
    EXPECT_EQ(l.operands, std::vector<std::string>{"-"});
    // Errors name the option.
    auto message = [](std::span<const Option> t, std::vector<std::string> w) {
        try {
            parse_words(t, std::move(w));
        } catch (const cli::UsageError& e) {
            return e.message;
        }
        return std::string("no error");
    };
    EXPECT_EQ(message(convert::kConvertOptions, {"-nx"}), "unknown option '-x'");
    EXPECT_EQ(message(convert::kConvertOptions, {"--bogus=1"}), "unknown option '--bogus'");
    EXPECT_EQ(message(convert::kConvertOptions, {"--json=1"}), "option '--json' takes no value");
    EXPECT_EQ(message(convert::kConvertOptions, {"-j"}), "option '-j' needs a value");
    EXPECT_EQ(message(ctl::verb_options("debug"), {"--d"}), "option '--d' is ambiguous (--debugger, --dump-dir, --directory)");
}

TEST(Programs, ShortOptionsUsersTypeAreAccepted) {
    TempDir dir;
    std::ofstream(dir / "README.txt") << "not a dump\n";
    // xen-dump-convert -nq: a dry run, quietly (the text file is skipped).
    auto c = run({"xen-dump-convert", "-nq", dir.path().string()});
    EXPECT_EQ(c.exit_code, 0) << c.err;
    EXPECT_EQ(c.out, "");
    // xen-dumpctl verify -q: the option is known (the file is not a dump: exit 1, not 2).
    auto v = run({"xen-dumpctl", "verify", "-q", (dir / "README.txt").string()});
    EXPECT_EQ(v.exit_code, 1) << v.err;
    // xen-dumpd -o=/dev/null: the option is known, only --domain is missing.
    auto d = run({"xen-dumpd", "-o=/dev/null"});
    EXPECT_EQ(d.exit_code, 2);
    EXPECT_EQ(d.err.find("unknown"), std::string::npos) << d.err;
    EXPECT_NE(d.err.find("--domain"), std::string::npos) << d.err;
    // A usage error prints one line, not the help.
    auto top = run({"xen-dumpctl"});
    EXPECT_EQ(top.exit_code, 2);
    EXPECT_TRUE(one_line(top.err)) << top.err;
}

}  // namespace
}  // namespace xendump::test
