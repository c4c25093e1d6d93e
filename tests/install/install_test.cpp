// The project as a distribution installs it: `meson install --destdir` of this
// build tree into a temporary directory, then every check is made on the
// installed copy (issue 6, "How it is shown").
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>

#include "legacy_gen.hpp"
#include "man_options.hpp"
#include "test_support.hpp"
#include "xendump/dump_spec.hpp"
#include "xendump/writer.hpp"
#include "xendump_config.h"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
namespace gen = legacy_gen;

// One program: where it is installed and which page documents it.
struct Program {
    std::string name;
    std::string dir;       // install directory (absolute, before DESTDIR)
    std::string man_page;  // relative to the man directory
};

const std::vector<Program>& programs() {
    static const std::vector<Program> list = {
        {"xen-dumpd", INSTALL_SBINDIR, "man8/xen-dumpd.8"},
        {"xen-dumpctl", INSTALL_BINDIR, "man1/xen-dumpctl.1"},
        {"xen-dump-convert", INSTALL_BINDIR, "man1/xen-dump-convert.1"},
        {"xen-dump-sim", INSTALL_BINDIR, "man1/xen-dump-sim.1"},
    };
    return list;
}

const std::vector<std::string> kManPages = {
    "man8/xen-dumpd.8",       "man1/xen-dumpctl.1",     "man1/xen-dump-convert.1",
    "man1/xen-dump-sim.1",    "man5/xen-dumpd.conf.5",  "man5/xen-dump-core.5",
};

// Given after the option under test: a parser that accepted the option then
// complains about this one; one that did not complains about the option.
constexpr const char* kBogus = "--no-such-option-for-the-install-test";

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_text(const fs::path& p, const std::string& text) {
    std::ofstream out(p);
    out << text;
}

std::string describe(const RunResult& r) {
    return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

class Installed : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = std::make_unique<TempDir>();
        dest_ = root_->path() / "destdir";
        ASSERT_STRNE(TOOL_MESON, "") << "meson not found";
        install_ = run({TOOL_MESON, "install", "-C", XENDUMP_BUILD_ROOT, "--no-rebuild", "--quiet", "--destdir",
                        dest_.string()});
    }
    static void TearDownTestSuite() { root_.reset(); }

    void SetUp() override { ASSERT_EQ(install_.exit_code, 0) << "meson install failed: " << describe(install_); }

    // An absolute install path inside the DESTDIR.
    static fs::path at(const std::string& path) { return dest_ / fs::path(path).relative_path(); }
    static fs::path man(const std::string& page) { return at(INSTALL_MANDIR) / page; }
    static fs::path program(const Program& p) { return at(p.dir) / p.name; }

    // Runs an installed program with the installed library, against a
    // simulated host that does not exist (nothing can touch a real one).
    static RunResult run_installed(std::vector<std::string> argv) {
        return run(argv, {"LD_LIBRARY_PATH=" + at(INSTALL_LIBDIR).string(),
                          "XEN_DUMP_HOST=sim:" + (root_->path() / "no-host").string()});
    }

    static fs::path scratch(const std::string& name) {
        fs::path p = root_->path() / "scratch" / name;
        fs::create_directories(p.parent_path());
        return p;
    }

    // All options a program's --help texts show (its own and its commands').
    static std::set<std::string> help_options(const Program& p, std::string* help_text = nullptr) {
        auto top = run_installed({program(p).string(), "--help"});
        EXPECT_EQ(top.exit_code, 0) << p.name << " --help: " << describe(top);
        EXPECT_FALSE(top.out.empty()) << p.name << " --help prints nothing on stdout";
        std::string all = top.out;
        for (const auto& cmd : commands_in_help(top.out)) {
            auto sub = run_installed({program(p).string(), cmd, "--help"});
            if (sub.exit_code == 0) all += sub.out;
        }
        if (help_text) *help_text = top.out;
        return options_in_help(all);
    }

    // Whether `p` accepts `option` (with a value when `takes_value`), alone
    // or after one of `commands`: the parser must complain about kBogus, not
    // about the option, or (--help, --version) answer and exit 0.
    static bool accepts(const Program& p, const std::vector<std::string>& commands, const std::string& option,
                        bool takes_value, std::string& log) {
        std::vector<std::vector<std::string>> contexts = {{}};
        for (const auto& c : commands) contexts.push_back({c});
        for (const auto& ctx : contexts) {
            std::vector<std::string> argv = {program(p).string()};
            argv.insert(argv.end(), ctx.begin(), ctx.end());
            argv.push_back(option);
            if (takes_value) argv.push_back("1");
            // Twice: an option that swallowed the first as its value still stops here.
            argv.push_back(kBogus);
            argv.push_back(kBogus);
            auto r = run_installed(argv);
            if (r.exit_code == 0 && !r.out.empty()) return true;
            if (r.exit_code == 2 && r.err.find(kBogus) != std::string::npos) return true;
            std::string shown;
            for (const auto& a : argv) shown += " " + a;
            log += shown + " -> " + describe(r) + "\n";
        }
        return false;
    }

    static inline std::unique_ptr<TempDir> root_;
    static inline fs::path dest_;
    static inline RunResult install_;
};

TEST_F(Installed, EveryFileIsInItsPlace) {
    std::vector<fs::path> expected;
    for (const auto& p : programs()) expected.push_back(program(p));
    const fs::path libdir = at(INSTALL_LIBDIR);
    expected.push_back(libdir / "libxendump.so");
    expected.push_back(libdir / "libxendump.so.0");
    expected.push_back(libdir / "pkgconfig" / "libxendump.pc");
    // Every public header, as many as the source tree has.
    const fs::path headers = source_root() / "libdump" / "include";
    for (const auto& e : fs::recursive_directory_iterator(headers))
        if (e.is_regular_file()) expected.push_back(at(INSTALL_INCLUDEDIR) / fs::relative(e.path(), headers));
    expected.push_back(at(INSTALL_UNITDIR) / "xen-dumpd.service");
    expected.push_back(at(INSTALL_UPLOAD_DROPIN_DIR) / "upload.conf");
    expected.push_back(at(INSTALL_TMPFILESDIR) / "xen-dumpd.conf");
    expected.push_back(at(INSTALL_SYSCONFDIR) / "xen-dumpd.conf");
    for (const auto& page : kManPages) expected.push_back(man(page));
    for (const auto& p : programs()) expected.push_back(at(INSTALL_COMPLETIONSDIR) / p.name);

    for (const auto& f : expected) EXPECT_TRUE(fs::is_regular_file(f)) << "not installed: " << f;
    for (const auto& p : programs()) {
        auto perms = fs::status(program(p)).permissions();
        EXPECT_NE(perms & fs::perms::owner_exec, fs::perms::none) << program(p) << " is not executable";
    }
    // The daemon is a system program, the others are for users too.
    EXPECT_FALSE(fs::exists(at(INSTALL_BINDIR) / "xen-dumpd"));
    // Nothing of the build tree's tests leaks into the install.
    for (const auto& e : fs::recursive_directory_iterator(dest_))
        EXPECT_EQ(e.path().filename().string().find("_test"), std::string::npos) << e.path();
}

TEST_F(Installed, ProgramsRunWithTheInstalledLibrary) {
    for (const auto& p : programs()) {
        auto r = run_installed({program(p).string(), "--version"});
        EXPECT_EQ(r.exit_code, 0) << p.name << ": " << describe(r);
        EXPECT_EQ(r.out, p.name + " " XENDUMP_VERSION "\n") << p.name;
    }
    ASSERT_STRNE(TOOL_LDD, "");
    auto ldd = run_installed({TOOL_LDD, program(programs()[1]).string()});
    ASSERT_EQ(ldd.exit_code, 0) << describe(ldd);
    EXPECT_NE(ldd.out.find("libxendump.so.0 => " + at(INSTALL_LIBDIR).string()), std::string::npos)
        << "the installed program does not load the installed library:\n" << ldd.out;
}

TEST_F(Installed, UnitCarriesTheInstallPaths) {
    const std::string unit = read_text(at(INSTALL_UNITDIR) / "xen-dumpd.service");
    EXPECT_NE(unit.find("\nExecStart=" + std::string(INSTALL_SBINDIR) + "/xen-dumpd\n"), std::string::npos);
    EXPECT_NE(unit.find("\nType=notify\n"), std::string::npos);
    EXPECT_NE(unit.find("\nWatchdogSec="), std::string::npos);
    EXPECT_NE(unit.find("\nRestart=on-failure\n"), std::string::npos);
    EXPECT_NE(unit.find("\nProtectSystem=strict\n"), std::string::npos);
    EXPECT_NE(unit.find("\nReadWritePaths=" + std::string(INSTALL_DUMP_DIR) + "\n"), std::string::npos);
    EXPECT_NE(unit.find("\nRuntimeDirectory="), std::string::npos);
    EXPECT_NE(unit.find("\nCapabilityBoundingSet="), std::string::npos);
    EXPECT_NE(unit.find("xenstored.service"), std::string::npos);
    EXPECT_NE(unit.find("on_crash=\"preserve\""), std::string::npos);
    std::smatch m;
    EXPECT_FALSE(std::regex_search(unit, m, std::regex("@[a-z_]+@"))) << "unsubstituted " << m.str();
}

// Debian has no xenstored.service: its /etc/init.d/xen runs as xen.service,
// and without this order the service started before xenstored, /proc/xen and
// /dev/xen/privcmd existed (seen in tests/xen-lab with dom0 under systemd).
TEST_F(Installed, UnitStartsAfterDebiansXenService) {
    const std::string unit = read_text(at(INSTALL_UNITDIR) / "xen-dumpd.service");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(unit, m, std::regex("\nAfter=([^\n]*)\n"))) << "no After= line";
    const std::string after = " " + m[1].str() + " ";
    EXPECT_NE(after.find(" xen.service "), std::string::npos) << "After=" << m[1];
    EXPECT_NE(after.find(" xenstored.service "), std::string::npos) << "After=" << m[1];
}

TEST_F(Installed, UnitPassesSystemdAnalyzeVerify) {
    ASSERT_STRNE(TOOL_SYSTEMD_ANALYZE, "") << "systemd-analyze not found";
    // verify checks that ExecStart= exists; the binary is in the DESTDIR, so a
    // copy of the installed unit points there (the only line changed). The
    // Documentation= pages are looked up in the DESTDIR too.
    const std::string unit = read_text(at(INSTALL_UNITDIR) / "xen-dumpd.service");
    const std::string exec = "\nExecStart=" + std::string(INSTALL_SBINDIR);
    auto pos = unit.find(exec);
    ASSERT_NE(pos, std::string::npos);
    std::string rerooted = unit;
    rerooted.replace(pos, exec.size(), "\nExecStart=" + at(INSTALL_SBINDIR).string());
    const std::vector<std::string> env = {"MANPATH=" + at(INSTALL_MANDIR).string()};

    fs::path good = scratch("good") / "xen-dumpd.service";
    fs::create_directories(good.parent_path());
    write_text(good, rerooted);
    auto r = run({TOOL_SYSTEMD_ANALYZE, "verify", good.string()}, env);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.out + r.err, "") << "systemd-analyze verify complains:\n" << r.err;

    // The method can fail: the same copy with one bad setting is reported.
    fs::path bad = scratch("bad") / "xen-dumpd.service";
    fs::create_directories(bad.parent_path());
    std::string broken = rerooted;
    broken.replace(broken.find("\nProtectSystem=strict"), 21, "\nProtectSystem=sometimes");
    write_text(bad, broken);
    auto rb = run({TOOL_SYSTEMD_ANALYZE, "verify", bad.string()}, env);
    EXPECT_NE(rb.out + rb.err, "") << "a broken unit went unnoticed";
}

// Issue 34 item 7: the unit allows local sockets alone; the example drop-in
// for uploads widens that to IPv4 and IPv6 (and nothing else), and the unit
// with the drop-in applied still passes systemd-analyze verify.
TEST_F(Installed, UploadDropInWidensOnlyTheAddressFamilies) {
    const std::string unit = read_text(at(INSTALL_UNITDIR) / "xen-dumpd.service");
    EXPECT_NE(unit.find("\nRestrictAddressFamilies=AF_UNIX\n"), std::string::npos);
    const fs::path dropin = at(INSTALL_UPLOAD_DROPIN_DIR) / "upload.conf";
    const std::string text = read_text(dropin);
    std::vector<std::string> active;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        if (!line.empty() && line[0] != '#') active.push_back(line);
    const std::vector<std::string> want = {"[Service]", "RestrictAddressFamilies=",
                                           "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"};
    EXPECT_EQ(active, want) << "the drop-in sets more than the address families";
    EXPECT_NE(text.find("#LoadCredential=aws-credentials:/etc/xen-dumpd/aws-credentials\n"), std::string::npos);

    ASSERT_STRNE(TOOL_SYSTEMD_ANALYZE, "") << "systemd-analyze not found";
    const std::string exec = "\nExecStart=" + std::string(INSTALL_SBINDIR);
    std::string rerooted = unit;
    rerooted.replace(rerooted.find(exec), exec.size(), "\nExecStart=" + at(INSTALL_SBINDIR).string());
    const std::vector<std::string> env = {"MANPATH=" + at(INSTALL_MANDIR).string()};
    auto verify_with = [&](const std::string& name, const std::string& dropin_text) {
        const fs::path dir = scratch(name);
        fs::create_directories(dir / "xen-dumpd.service.d");
        write_text(dir / "xen-dumpd.service", rerooted);
        write_text(dir / "xen-dumpd.service.d" / "upload.conf", dropin_text);
        return run({TOOL_SYSTEMD_ANALYZE, "verify", (dir / "xen-dumpd.service").string()}, env);
    };
    auto r = verify_with("dropin-good", text);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.out + r.err, "") << "systemd-analyze verify complains:\n" << r.err;
    // The drop-in is read: a bad family in it is reported.
    std::string broken = text;
    broken.replace(broken.find("AF_INET6"), 8, "AF_NOSUCH");
    auto rb = verify_with("dropin-bad", broken);
    EXPECT_NE(rb.out + rb.err, "") << "the drop-in was not read";
}

TEST_F(Installed, TmpfilesCreatesThePrivateDumpDirectory) {
    const std::string conf = read_text(at(INSTALL_TMPFILESDIR) / "xen-dumpd.conf");
    EXPECT_NE(conf.find("\nd " + std::string(INSTALL_DUMP_DIR) + " 0700 root root -\n"), std::string::npos) << conf;
    if (std::string(TOOL_SYSTEMD_TMPFILES).empty()) GTEST_SKIP() << "systemd-tmpfiles not found";
    fs::path root = scratch("tmpfiles-root");
    fs::create_directories(root);
    auto r = run({TOOL_SYSTEMD_TMPFILES, "--create", "--root=" + root.string(),
                  (at(INSTALL_TMPFILESDIR) / "xen-dumpd.conf").string()});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    fs::path dir = root / fs::path(INSTALL_DUMP_DIR).relative_path();
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST_F(Installed, ManPagesAreLintClean) {
    ASSERT_STRNE(TOOL_MANDOC, "") << "mandoc not found";
    for (const auto& page : kManPages) {
        auto r = run({TOOL_MANDOC, "-T", "lint", "-W", "warning", man(page).string()});
        EXPECT_EQ(r.exit_code, 0) << page << ": " << describe(r);
        EXPECT_EQ(r.out + r.err, "") << page;
        // The style level too. Only what depends on the manuals installed on
        // this machine (cross references to pages the host lacks, its
        // mandoc.db) is not the page's fault.
        auto style = run({TOOL_MANDOC, "-T", "lint", man(page).string()});
        std::istringstream lines(style.out + style.err);
        for (std::string line; std::getline(lines, line);) {
            if (line.find("referenced manual not found") != std::string::npos) continue;
            if (line.find("mandoc.db") != std::string::npos) continue;
            ADD_FAILURE() << page << ": " << line;
        }
    }
}

TEST_F(Installed, ManPagesHaveTheStandardSections) {
    const std::vector<std::string> required = {"NAME",  "SYNOPSIS",    "DESCRIPTION", "OPTIONS",
                                               "FILES", "EXIT STATUS", "EXAMPLES",    "SEE ALSO"};
    for (const auto& page : kManPages) {
        auto sections = sections_in_mdoc(read_text(man(page)));
        for (const auto& s : required)
            EXPECT_NE(std::find(sections.begin(), sections.end(), s), sections.end()) << page << " lacks " << s;
    }
}

TEST_F(Installed, EveryOptionOfHelpIsInTheManPage) {
    for (const auto& p : programs()) {
        std::string help;
        auto from_help = help_options(p, &help);
        EXPECT_FALSE(from_help.empty()) << p.name;
        auto documented = options_in_mdoc(read_text(man(p.man_page)));
        for (const auto& o : from_help)
            EXPECT_TRUE(documented.contains(o)) << p.name << " --help shows " << o << ", " << p.man_page
                                                << " does not document it";
        auto commands = commands_in_mdoc(read_text(man(p.man_page)));
        for (const auto& c : commands_in_help(help))
            EXPECT_TRUE(commands.contains(c)) << p.name << " command " << c << " is not in " << p.man_page;
    }
}

TEST_F(Installed, EveryOptionOfTheManPageIsAccepted) {
    for (const auto& p : programs()) {
        auto text = read_text(man(p.man_page));
        auto documented = options_in_mdoc(text);
        EXPECT_FALSE(documented.empty()) << p.man_page;
        auto top = run_installed({program(p).string(), "--help"});
        auto commands = commands_in_help(top.out);
        for (const auto& [option, takes_value] : documented) {
            std::string log;
            EXPECT_TRUE(accepts(p, commands, option, takes_value, log))
                << p.man_page << " documents " << option << (takes_value ? " VALUE" : "") << ", but "
                << p.name << " refuses it:\n" << log;
        }
    }
    // The method can fail: an option nobody has is refused everywhere.
    std::string log;
    EXPECT_FALSE(accepts(programs()[1], {"info", "list"}, "--frobnicate", false, log));
}

TEST_F(Installed, ConfigFileListsEveryKeyAtItsDefault) {
    // The keys the service's parser knows, from its table in daemon/config.cpp.
    const std::string parser = read_text(source_root() / "daemon" / "config.cpp");
    std::set<std::string> keys;
    std::regex key_entry(R"re(\{"([A-Za-z]+)", \[\])re");
    for (std::sregex_iterator it(parser.begin(), parser.end(), key_entry), end; it != end; ++it)
        keys.insert((*it)[1]);
    ASSERT_GE(keys.size(), 10u) << "cannot find the keys in daemon/config.cpp";

    const fs::path installed = at(INSTALL_SYSCONFDIR) / "xen-dumpd.conf";
    const std::string conf = read_text(installed);
    const std::string page = read_text(man("man5/xen-dumpd.conf.5"));
    std::string uncommented;
    std::set<std::string> listed;
    std::istringstream lines(conf);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_match(line, m, std::regex("#([A-Za-z]+)=(.*)"))) {
            listed.insert(m[1]);
            line = line.substr(1);
        } else if (!line.empty() && line[0] != '#') {
            EXPECT_TRUE(line == "[Dump]" || line == "[Upload]") << "only the section headers are active in " << installed
                                                                 << ": " << line;
        }
        uncommented += line + "\n";
    }
    EXPECT_EQ(listed, keys) << "the installed configuration and the parser disagree on the keys";
    for (const auto& k : keys)
        EXPECT_NE(page.find(".It Cm " + k + "= "), std::string::npos) << "xen-dumpd.conf(5) lacks " << k;

    // Every listed default, made active, is accepted by the real parser.
    fs::path active = scratch("active.conf");
    write_text(active, uncommented);
    fs::path empty_dir = scratch("dumps");
    fs::create_directories(empty_dir);
    const Program& ctl = programs()[1];
    auto r = run_installed(
        {program(ctl).string(), "config", "--json", "--config", active.string(), "--dump-dir", empty_dir.string()});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.err, "") << "a listed default is refused (xen-dumpctl warns and uses its defaults)";
    // The method can fail: a bad value in the same file is reported.
    fs::path broken = scratch("broken.conf");
    write_text(broken, uncommented + "MaxParallel=0\n");
    auto rb = run_installed(
        {program(ctl).string(), "list", "--json", "--config", broken.string(), "--dump-dir", empty_dir.string()});
    EXPECT_NE(rb.err.find("MaxParallel"), std::string::npos) << describe(rb);
    // And the defaults are the parser's: the dump directory it reports is the same.
    auto with_defaults = run_installed({program(ctl).string(), "list", "--help", "--config", active.string()});
    auto without = run_installed({program(ctl).string(), "list", "--help", "--config", scratch("none.conf").string()});
    EXPECT_EQ(with_defaults.out, without.out);
    EXPECT_NE(with_defaults.out.find(INSTALL_DUMP_DIR), std::string::npos) << with_defaults.out;
}

TEST_F(Installed, CompletionsLoadAndOfferOnlyDocumentedOptions) {
    ASSERT_STRNE(TOOL_BASH, "");
    for (const auto& p : programs()) {
        const fs::path file = at(INSTALL_COMPLETIONSDIR) / p.name;
        auto r = run({TOOL_BASH, "-c", "source \"$0\" && complete -p " + p.name, file.string()});
        EXPECT_EQ(r.exit_code, 0) << p.name << ": " << describe(r);
        EXPECT_NE(r.out.find(p.name), std::string::npos) << r.out;
        // The words offered are the single-quoted lists of the script (the
        // rest is bash: "compopt -o" is not an option of the program).
        const std::string script = read_text(file);
        std::string offered;
        std::regex quoted("'([^']*)'");
        for (std::sregex_iterator it(script.begin(), script.end(), quoted), end; it != end; ++it)
            offered += (*it)[1].str() + "\n";
        auto documented = options_in_mdoc(read_text(man(p.man_page)));
        EXPECT_FALSE(options_in_text(offered).empty()) << p.name;
        for (const auto& o : options_in_text(offered))
            EXPECT_TRUE(documented.contains(o)) << "completion of " << p.name << " offers undocumented " << o;
    }
}

TEST_F(Installed, PublicHeadersAreSelfContained) {
    ASSERT_STRNE(TOOL_CXX, "");
    std::vector<std::string> argv = {TOOL_CXX, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
                                     "-I", at(INSTALL_INCLUDEDIR).string()};
    // One source file that includes nothing but the header, per header.
    const fs::path include = at(INSTALL_INCLUDEDIR);
    size_t headers = 0;
    for (const auto& e : fs::recursive_directory_iterator(include / "xendump"))
        if (e.is_regular_file() && e.path().extension() == ".hpp") {
            const fs::path tu = scratch("headers/tu" + std::to_string(headers++) + ".cpp");
            write_text(tu, "#include <" + fs::relative(e.path(), include).string() + ">\n");
            argv.push_back(tu.string());
        }
    ASSERT_GE(headers, 9u);
    // Each file named is its own translation unit.
    auto r = run(argv);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
}

// The consumer program (pkgconfig_consumer.cpp) built with nothing but the
// installed .pc file and headers; built once, for the tests below.
class Consumer : public Installed {
protected:
    static fs::path build() {
        static fs::path exe;
        static std::string failure;
        if (!exe.empty() || !failure.empty()) {
            EXPECT_EQ(failure, "");
            return exe;
        }
        EXPECT_STRNE(TOOL_PKG_CONFIG, "");
        EXPECT_STRNE(TOOL_CXX, "");
        // Only what the installed .pc file says: its prefix moved to the DESTDIR.
        const std::vector<std::string> env = {"PKG_CONFIG_PATH=" + (at(INSTALL_LIBDIR) / "pkgconfig").string()};
        auto flags = run({TOOL_PKG_CONFIG, "--define-variable=prefix=" + at(INSTALL_PREFIX).string(), "--cflags",
                          "--libs", "libxendump"},
                         env);
        EXPECT_EQ(flags.exit_code, 0) << describe(flags);
        EXPECT_NE(flags.out.find("-I" + at(INSTALL_INCLUDEDIR).string()), std::string::npos) << flags.out;
        EXPECT_NE(flags.out.find("-L" + at(INSTALL_LIBDIR).string()), std::string::npos) << flags.out;

        const fs::path out = scratch("consumer");
        std::vector<std::string> compile = {TOOL_CXX, "-std=c++20", "-O0", "-o", out.string(), CONSUMER_SOURCE};
        std::istringstream words(flags.out);
        for (std::string w; words >> w;) compile.push_back(w);
        auto built = run(compile);
        if (flags.exit_code != 0 || built.exit_code != 0) {
            failure = describe(flags) + describe(built);
            ADD_FAILURE() << "the consumer did not build: " << failure;
            return {};
        }
        return exe = out;
    }

    // A dump written by the library: 13 pages in two runs, pfns 3-9 and
    // 40-45; `expected_word` gets the first word of pfn 3, as %016llx.
    static fs::path write_v1_dump(std::string& expected_word) {
        std::vector<PageEntry> entries;
        for (uint64_t pfn = 3; pfn <= 9; ++pfn) entries.push_back({pfn, pfn + 1000});
        for (uint64_t pfn = 40; pfn <= 45; ++pfn) entries.push_back({pfn, pfn + 5000});
        PatternPageSource pages(entries, 7);
        DumpSpec spec;
        spec.domain.set("DOMID", "7");
        spec.domain.set("NAME", "consumer");
        VcpuContext vcpu;
        vcpu.bytes.resize(format::kVcpuContextSize64);
        spec.vcpus.push_back(vcpu);
        const fs::path dump = scratch("consumer.core");
        if (!fs::exists(dump)) write_dump_file(dump, spec, pages);
        std::byte first[4096];
        fill_pattern_page(7, 3, first);
        expected_word = word_text(first);
        return dump;
    }

    static std::string word_text(const std::byte* page) {
        uint64_t word = 0;
        std::memcpy(&word, page, sizeof word);
        char text[17];
        std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(word));
        return text;
    }
};

TEST_F(Consumer, ProgramBuiltWithThePkgConfigFileReadsADump) {
    std::string expected_word;
    const fs::path dump = write_v1_dump(expected_word);
    const fs::path exe = build();
    ASSERT_FALSE(exe.empty());

    auto r = run_installed({exe.string(), dump.string()});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.out, "pages 13\nverify ok\nfirst pfn 3 word " + expected_word + "\n");
}

// The public conversion API (xendump/convert.hpp) from outside the tree: a
// legacy xc_core file of an HVM guest (pages in pfn order, 0xf00febed) with
// holes becomes a v1 file that opens, verifies and holds the guest's pages.
TEST_F(Consumer, ProgramBuiltWithThePkgConfigFileConvertsADump) {
    std::string expected_word;
    const fs::path dump = write_v1_dump(expected_word);
    auto guest = gen::make_guest({.width = 8, .nr_pfns = 300, .seed = 61, .hole_pfns = {0, 1, 150}});
    const fs::path legacy = scratch("consumer-legacy.core");
    gen::write_bytes(legacy, gen::make_file(guest, {.variant = gen::Variant::hvm_pfn_order, .tool_width = 8}));
    const fs::path output = scratch("consumer-legacy.v1.core");
    fs::remove(output);
    const fs::path exe = build();
    ASSERT_FALSE(exe.empty());

    auto r = run_installed({exe.string(), dump.string(), legacy.string(), output.string()});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    const std::string pages = std::to_string(guest.present());
    EXPECT_EQ(r.out, "pages 13\nverify ok\nfirst pfn 3 word " + expected_word + "\ninput format xc_core\n" +
                         "converted xc_core pages " + pages + "\noutput pages " + pages + "\nverify ok\n" +
                         "output first pfn 2 word " + word_text(guest.page_of_pfn[2].data()) + "\n");
    EXPECT_TRUE(fs::is_regular_file(output));
}

// libxendump.so.0 as installed: its SONAME is the name its pkg-config file
// links (-lxendump, major version 0), and it exports the public API only.
TEST_F(Installed, LibraryExportsOnlyThePublicApi) {
    const fs::path lib = at(INSTALL_LIBDIR) / "libxendump.so.0";
    auto dyn = run({"/usr/bin/readelf", "-d", lib.string()});
    ASSERT_EQ(dyn.exit_code, 0) << describe(dyn);
    EXPECT_NE(dyn.out.find("Library soname: [libxendump.so.0]"), std::string::npos) << dyn.out;
    const std::string pc = read_text(at(INSTALL_LIBDIR) / "pkgconfig" / "libxendump.pc");
    EXPECT_NE(pc.find("-lxendump"), std::string::npos) << pc;
    EXPECT_NE(pc.find("Name: libxendump"), std::string::npos) << pc;

    auto r = run({"/usr/bin/python3", (source_root() / "tests" / "abi" / "check_exports.py").string(), lib.string(),
                  at(INSTALL_INCLUDEDIR).string()});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
}

}  // namespace
}  // namespace xendump::test
