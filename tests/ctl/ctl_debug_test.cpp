// xen-dumpctl debug (issue 21): the debugger's command line for PV, PVH and
// HVM dumps of the simulated host (--print-command), the debug vmlinux found
// by the release the dump records, the errors when there is none, and crash
// run for real on a dump of the real fixture RAM where its debug vmlinux is
// installed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>

#include "dump_support.hpp"
#include "test_support.hpp"
#include "xendump/dumper.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kRelease = "6.1.0-57-amd64";

struct GuestCase {
    const char* name;
    json domain;
};

std::vector<GuestCase> guest_cases() {
    // Each guest its own machine frames, so that they can share a host.
    auto extents = [](uint64_t base) {
        return json::array({json::array({0, base, 160}), json::array({256, base + 0x1000, 200})});
    };
    return {{"pv", dump::pv_domain(5, 8, "tree", 1024, extents(0x100000))},
            {"pvh", dump::hvm_domain(6, "pvh", 1024, extents(0x200000))},
            {"hvm", dump::hvm_domain(7, "hvm", 1024, extents(0x300000))}};
}

TEST(CtlDebug, PrintsTheDebuggersCommandLineForPvPvhAndHvmDumps) {
    TempDir dir;
    const fs::path vmlinux = dir / "vmlinux";
    std::ofstream(vmlinux) << "not read, only named";
    for (const auto& c : guest_cases()) {
        SCOPED_TRACE(c.name);
        sim::Host host(dump::host_spec({c.domain}));
        const fs::path file = dir / (std::string(c.name) + ".core");
        dump_domain_to_file(*host.hv, c.domain["domid"].get<uint32_t>(), file);
        const std::string v = vmlinux.string(), d = file.string();
        auto crash = run({"xen-dumpctl", "debug", "--print-command", "--vmlinux", v, d});
        ASSERT_EQ(crash.exit_code, 0) << crash.err;
        // No --kaslr or other flag: crash opens every guest type's dump as a kdump vmcore.
        EXPECT_EQ(crash.out, "crash " + v + " " + d + "\n");
        auto args = run({"xen-dumpctl", "debug", "--print-command", "--vmlinux=" + v, "-A", "-s  -i cmds", d});
        EXPECT_EQ(args.out, "crash -s -i cmds " + v + " " + d + "\n") << args.err;
        auto gdb = run({"xen-dumpctl", "debug", "--print-command", "--debugger", "gdb", "--vmlinux", v, "-A", "-q",
                        "-A", "-batch", d});
        EXPECT_EQ(gdb.out, "gdb -q -batch " + v + " " + d + "\n") << gdb.err;
        auto drgn = run({"xen-dumpctl", "debug", "--print-command", "--debugger=drgn", "--vmlinux", v, "-A", "-q", d});
        EXPECT_EQ(drgn.out, "drgn -c " + d + " -s " + v + " -q\n") << drgn.err;
    }
}

// The printed line is for a shell: a word with a space or a quote is quoted.
TEST(CtlDebug, PrintedCommandIsQuotedForTheShell) {
    TempDir dir;
    const fs::path vmlinux = dir / "vm linux's";
    std::ofstream(vmlinux) << "x";
    sim::Host host(dump::host_spec({guest_cases()[1].domain}));
    const fs::path file = dir / "pvh.core";
    dump_domain_to_file(*host.hv, 6, file);
    auto r = run({"xen-dumpctl", "debug", "--print-command", "--vmlinux", vmlinux.string(), file.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "crash '" + dir.path().string() + "/vm linux'\\''s' " + file.string() + "\n");
    // The shell reads it back as the same words.
    auto words = run({"sh", "-c", "eval \"set -- $0\"; printf '%s\\n' \"$@\"", r.out.substr(0, r.out.size() - 1)});
    EXPECT_EQ(words.out, "crash\n" + vmlinux.string() + "\n" + file.string() + "\n") << words.err;
}

TEST(CtlDebug, SelectsTheDumpByMatchInTheDumpDirectory) {
    TempDir dir;
    const fs::path dumps = dir / "dumps", vmlinux = dir / "vmlinux";
    fs::create_directory(dumps);
    std::ofstream(vmlinux) << "x";
    std::ofstream(dir / "empty.conf") << "";
    auto cases = guest_cases();
    sim::Host host(dump::host_spec({cases[0].domain, cases[2].domain}));
    dump_domain_to_file(*host.hv, 5, dumps / "pv-5.core");
    dump_domain_to_file(*host.hv, 7, dumps / "hvm-7.core");
    auto r = run({"xen-dumpctl", "debug", "--print-command", "--vmlinux", vmlinux.string(), "--config",
                  (dir / "empty.conf").string(), "--dump-dir", dumps.string(), "DOMID=7"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "crash " + vmlinux.string() + " " + (dumps / "hvm-7.core").string() + "\n");
}

TEST(CtlDebug, ErrorsNameWhatIsMissing) {
    TempDir dir;
    auto c = guest_cases()[2];
    sim::Host host(dump::host_spec({c.domain}));
    const fs::path file = dir / "hvm.core";
    dump_domain_to_file(*host.hv, 7, file);
    // A pattern guest has no kernel: no release to look for.
    auto r = run({"xen-dumpctl", "debug", "--print-command", file.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no guest kernel release"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--vmlinux"), std::string::npos) << r.err;
    auto nofile = run({"xen-dumpctl", "debug", "--print-command", "--vmlinux", (dir / "nope").string(), file.string()});
    EXPECT_EQ(nofile.exit_code, 1);
    EXPECT_NE(nofile.err.find((dir / "nope").string()), std::string::npos) << nofile.err;
    EXPECT_EQ(run({"xen-dumpctl", "debug", "--debugger", "lldb", file.string()}).exit_code, 2);
    EXPECT_EQ(run({"xen-dumpctl", "debug"}).exit_code, 2);
    // execvp failing (no such debugger on PATH) is one clear line.
    std::ofstream(dir / "vmlinux") << "x";
    auto absent = run({"xen-dumpctl", "debug", "--vmlinux", (dir / "vmlinux").string(), file.string()},
                      {"PATH=" + dir.path().string()});
    EXPECT_EQ(absent.exit_code, 1);
    EXPECT_NE(absent.err.find("cannot run crash"), std::string::npos) << absent.err;
}

// The real fixture RAM (Debian's 6.1.0-57-amd64) as a simulated HVM guest, dumped once.
struct FixtureDump {
    TempDir dir;
    fs::path image = dir / "linux.raw";
    fs::path dump = dir / "linux.core";
    std::unique_ptr<sim::Host> host;
    FixtureDump() {
        RunResult r = run({"zstd", "-q", "-d", "-o", image.string(),
                           (shared_dir() / "fixtures" / "linux-6.1-x86_64-128m.raw.zst").string()});
        if (r.exit_code != 0) throw std::runtime_error("zstd: " + r.err);
        constexpr uint64_t kPages = (128ULL << 20) / 4096;
        json d = dump::hvm_domain(21, "hvm", kPages, json::array({json::array({0, 0x800000, kPages})}));
        d["memory"] = json{{"image", image.string()}};
        host = std::make_unique<sim::Host>(dump::host_spec({d}));
        dump_domain_to_file(*host->hv, 21, dump);
    }
};

FixtureDump& fixture() {
    static FixtureDump f;
    return f;
}

TEST(CtlDebugFixture, FindsTheDebugVmlinuxByTheRecordedRelease) {
    const fs::path dump = fixture().dump;
    TempDir root;
    // Nothing installed under the root: both paths and the package are named.
    auto none = run({"xen-dumpctl", "debug", "--print-command", dump.string()},
                    {"XENDUMP_DEBUG_ROOT=" + root.path().string()});
    EXPECT_EQ(none.exit_code, 1);
    EXPECT_NE(none.err.find((root / ("usr/lib/debug/boot/vmlinux-" + std::string(kRelease))).string()),
              std::string::npos) << none.err;
    EXPECT_NE(none.err.find((root / "usr/lib/debug/lib/modules").string() + "/" + kRelease + "/vmlinux"),
              std::string::npos) << none.err;
    EXPECT_NE(none.err.find(std::string("linux-image-") + kRelease + "-dbg"), std::string::npos) << none.err;
    // The modules path, then the boot path, which comes first.
    const fs::path modules = root / "usr/lib/debug/lib/modules" / kRelease / "vmlinux";
    fs::create_directories(modules.parent_path());
    std::ofstream(modules) << "x";
    auto m = run({"xen-dumpctl", "debug", "--print-command", dump.string()},
                 {"XENDUMP_DEBUG_ROOT=" + root.path().string()});
    EXPECT_EQ(m.out, "crash " + modules.string() + " " + dump.string() + "\n") << m.err;
    const fs::path boot = root / "usr/lib/debug/boot" / ("vmlinux-" + std::string(kRelease));
    fs::create_directories(boot.parent_path());
    std::ofstream(boot) << "x";
    auto b = run({"xen-dumpctl", "debug", "--print-command", dump.string()},
                 {"XENDUMP_DEBUG_ROOT=" + root.path().string()});
    EXPECT_EQ(b.out, "crash " + boot.string() + " " + dump.string() + "\n") << b.err;
}

TEST(CtlDebugFixture, RunsCrashOnTheDumpForReal) {
    const fs::path installed = fs::path("/usr/lib/debug/boot") / ("vmlinux-" + std::string(kRelease));
    if (!fs::exists(installed)) GTEST_SKIP() << installed << " is not installed";
    if (run({"sh", "-c", "command -v crash"}).exit_code != 0) GTEST_SKIP() << "crash is not installed";
    const fs::path dump = fixture().dump;
    auto printed = run({"xen-dumpctl", "debug", "--print-command", dump.string()});
    EXPECT_EQ(printed.out, "crash " + installed.string() + " " + dump.string() + "\n") << printed.err;
    // As an operator would: commands on crash's standard input.
    const std::string ctl = build_program("xen-dumpctl").string();
    auto r = run({"sh", "-c", "printf 'sys\\nquit\\n' | timeout 600 \"$0\" debug -A -s \"$1\"", ctl, dump.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("RELEASE: 6\\.1\\.0-57-amd64"))) << r.out;
}

}  // namespace
}  // namespace xendump::test
