// xen-dumpctl debug (issue 21): the debugger's command line for PV, PVH and
// HVM dumps of the simulated host (--print-command), the debug vmlinux found
// by the release the dump records, the errors when there is none, and crash
// run for real on a dump of the real fixture RAM where its debug vmlinux is
// installed. xen-dumpctl dump -o (the same issue): the vmcore's segments
// and notes against the dump's pages, and crash reading it.
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <regex>

#include "dump_support.hpp"
#include "guest_ram.hpp"
#include "test_support.hpp"
#include "xendump/dumper.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/reader.hpp"

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
    // No FILE or MATCH: the latest dump of the dump directory (none here), as coredumpctl.
    EXPECT_EQ(run({"xen-dumpctl", "debug", "--dump-dir", (dir / "no-such-dir").string()}).exit_code, 1);
    // execvp failing (no such debugger on PATH) is one clear line.
    std::ofstream(dir / "vmlinux") << "x";
    auto absent = run({"xen-dumpctl", "debug", "--vmlinux", (dir / "vmlinux").string(), file.string()},
                      {"PATH=" + dir.path().string()});
    EXPECT_EQ(absent.exit_code, 1);
    EXPECT_NE(absent.err.find("cannot run crash"), std::string::npos) << absent.err;
}

// What libelf reads of a vmcore `xen-dumpctl dump` wrote, checked against the
// dump it came from: ET_CORE, one PT_LOAD per run at p_paddr = pfn * 4096
// (p_vaddr 0, p_align 0) holding the run's pages, the image PT_LOAD (when the
// dump has one) holding the pages of its physical range, and the notes.
struct VmcoreCheck {
    size_t loads = 0, image_loads = 0, prstatus = 0;
    std::optional<std::string> vmcoreinfo;
};

void check_vmcore(const fs::path& vmcore, const DumpReader& dump, VmcoreCheck& c) {
    elf_version(EV_CURRENT);
    const int fd = ::open(vmcore.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << vmcore;
    if (fd < 0) return;
    Elf* e = elf_begin(fd, ELF_C_READ, nullptr);
    EXPECT_NE(e, nullptr);
    GElf_Ehdr eh;
    EXPECT_NE(gelf_getehdr(e, &eh), nullptr);
    EXPECT_EQ(eh.e_type, ET_CORE);
    EXPECT_EQ(eh.e_machine, EM_X86_64);
    size_t phnum = 0;
    elf_getphdrnum(e, &phnum);
    std::ifstream in(vmcore, std::ios::binary);
    std::vector<char> got(4096), want(4096);
    uint64_t pages = 0;
    for (size_t i = 0; i < phnum; ++i) {
        GElf_Phdr ph;
        gelf_getphdr(e, static_cast<int>(i), &ph);
        if (ph.p_type == PT_NOTE) {
            std::vector<char> notes(ph.p_filesz);
            in.seekg(static_cast<std::streamoff>(ph.p_offset));
            in.read(notes.data(), static_cast<std::streamsize>(notes.size()));
            Elf_Data d{};
            d.d_buf = notes.data();
            d.d_size = notes.size();
            d.d_type = ELF_T_NHDR;
            size_t off = 0, name_off = 0, desc_off = 0;
            GElf_Nhdr n;
            while ((off = gelf_getnote(&d, off, &n, &name_off, &desc_off)) > 0) {
                const std::string name(notes.data() + name_off, n.n_namesz ? n.n_namesz - 1 : 0);
                if (name == "CORE" && n.n_type == NT_PRSTATUS) ++c.prstatus;
                if (name == "VMCOREINFO") c.vmcoreinfo = std::string(notes.data() + desc_off, n.n_descsz);
            }
            continue;
        }
        EXPECT_EQ(ph.p_type, PT_LOAD);
        EXPECT_EQ(ph.p_align, 0u);
        EXPECT_EQ(ph.p_filesz % 4096, 0u);
        EXPECT_EQ(ph.p_paddr % 4096, 0u);
        if (ph.p_vaddr) ++c.image_loads;
        else ++c.loads;
        for (uint64_t k = 0; k < ph.p_filesz / 4096; ++k) {
            const uint64_t pfn = ph.p_paddr / 4096 + k;
            ASSERT_TRUE(dump.read_page_by_pfn(pfn, std::as_writable_bytes(std::span(want)))) << "pfn " << pfn;
            in.seekg(static_cast<std::streamoff>(ph.p_offset + k * 4096));
            in.read(got.data(), 4096);
            ASSERT_TRUE(in.good());
            ASSERT_EQ(got, want) << "pfn " << pfn << " of segment " << i;
            if (!ph.p_vaddr) ++pages;
        }
    }
    EXPECT_EQ(pages, dump.nr_pages());
    elf_end(e);
    ::close(fd);
}

TEST(CtlDump, WritesThePagesAsAPlainVmcoreForPvPvhAndHvmDumps) {
    TempDir dir;
    for (const auto& c : guest_cases()) {
        SCOPED_TRACE(c.name);
        sim::Host host(dump::host_spec({c.domain}));
        const fs::path file = dir / (std::string(c.name) + ".core"), out = dir / (std::string(c.name) + ".vmcore");
        dump_domain_to_file(*host.hv, c.domain["domid"].get<uint32_t>(), file);
        auto r = run({"xen-dumpctl", "dump", "-o", out.string(), file.string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const DumpReader dump = DumpReader::open(file);
        VmcoreCheck v;
        check_vmcore(out, dump, v);
        EXPECT_EQ(v.loads, dump.runs().size());
        EXPECT_EQ(v.prstatus, dump.vcpus().size());
        EXPECT_FALSE(v.vmcoreinfo);  // a pattern guest has no kernel
        // readelf agrees: a core file whose LOADs have alignment 0.
        auto elf = run({"readelf", "-lW", out.string()});
        EXPECT_NE(elf.out.find("CORE (Core file)"), std::string::npos) << elf.out;
        // To a pipe, the same bytes.
        auto piped = run({"sh", "-c", "\"$0\" dump -o - \"$1\" | cmp - \"$2\"", build_program("xen-dumpctl").string(),
                          file.string(), out.string()});
        EXPECT_EQ(piped.exit_code, 0) << piped.out << piped.err;
        // An existing file is not replaced, and nothing is left behind.
        auto again = run({"xen-dumpctl", "dump", "--output=" + out.string(), file.string()});
        EXPECT_EQ(again.exit_code, 1);
        EXPECT_NE(again.err.find(out.string()), std::string::npos) << again.err;
    }
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
    EXPECT_EQ(entries, 2 * guest_cases().size());
    // -o is required.
    auto none = run({"xen-dumpctl", "dump", (dir / "pv.core").string()});
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_NE(none.err.find("-o FILE"), std::string::npos) << none.err;
}

// The real fixture RAM (Debian's 6.1.0-57-amd64) as a simulated HVM guest, dumped once.
struct FixtureDump {
    TempDir dir;
    fs::path image = dir / "linux.raw";
    fs::path dump = dir / "linux.core";
    std::unique_ptr<sim::Host> host = dump::fixture_ram_host(image, 21);
    FixtureDump() { dump_domain_to_file(*host->hv, 21, dump); }
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

// No debug vmlinux installed, DEBUGINFOD_URLS set: debuginfod-find fetches
// it by the build id of the dump's VMCOREINFO (a fake one on PATH here, which
// records how it was called).
TEST(CtlDebugFixture, FetchesTheVmlinuxFromDebuginfodByTheBuildId) {
    const fs::path dump = fixture().dump;
    const std::string build_id = [&] {
        const DumpReader r = DumpReader::open(dump);
        auto info = kernel::Vmcoreinfo::parse(r.vmcoreinfo().value_or(""));
        return info && info->build_id() ? std::string(*info->build_id()) : std::string();
    }();
    ASSERT_EQ(build_id.size(), 40u) << "the fixture kernel's VMCOREINFO has a BUILD-ID";
    TempDir root, bin;
    const fs::path fetched = bin / "cache" / build_id / "debuginfo";
    fs::create_directories(fetched.parent_path());
    std::ofstream(fetched) << "x";
    {
        std::ofstream tool(bin / "debuginfod-find");
        tool << "#!/bin/sh\n"
                "printf '%s\\n' \"$*\" > \"$(dirname \"$0\")/called\"\n"
                "[ \"$1\" = debuginfo ] && [ -f \"$(dirname \"$0\")/cache/$2/debuginfo\" ] || { echo 'Server query failed' >&2; exit 1; }\n"
                "echo \"$(dirname \"$0\")/cache/$2/debuginfo\"\n";
    }
    fs::permissions(bin / "debuginfod-find", fs::perms::owner_all);
    const std::string path = "PATH=" + bin.path().string() + ":/usr/bin:/bin";
    const std::string no_root = "XENDUMP_DEBUG_ROOT=" + root.path().string();
    auto r = run({"xen-dumpctl", "debug", "--print-command", dump.string()},
                 {path, no_root, "DEBUGINFOD_URLS=https://debuginfod.example"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "crash " + fetched.string() + " " + dump.string() + "\n");
    std::ifstream called(bin / "called");
    std::string line;
    std::getline(called, line);
    EXPECT_EQ(line, "debuginfo " + build_id);
    // Without DEBUGINFOD_URLS, debuginfod is not asked.
    fs::remove(bin / "called");
    auto unset = run({"xen-dumpctl", "debug", "--print-command", dump.string()}, {path, no_root});
    EXPECT_EQ(unset.exit_code, 1);
    EXPECT_FALSE(fs::exists(bin / "called"));
    // debuginfod has nothing: the error names the local paths and the build id.
    fs::remove(fetched);
    auto none = run({"xen-dumpctl", "debug", "--print-command", dump.string()},
                    {path, no_root, "DEBUGINFOD_URLS=https://debuginfod.example"});
    EXPECT_EQ(none.exit_code, 1);
    EXPECT_NE(none.err.find("usr/lib/debug/boot/vmlinux-" + std::string(kRelease)), std::string::npos) << none.err;
    EXPECT_NE(none.err.find("build id " + build_id), std::string::npos) << none.err;
}

// The fixture kernel's vmcore: its VMCOREINFO note, the image segment, and
// (where crash and the debug vmlinux are installed) crash reading it.
TEST(CtlDumpFixture, VmcoreHasTheKernelsNotesAndImageSegment) {
    const fs::path dump = fixture().dump;
    TempDir dir;
    const fs::path out = dir / "vmcore";
    auto r = run({"xen-dumpctl", "dump", "-o", out.string(), dump.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const DumpReader reader = DumpReader::open(dump);
    VmcoreCheck v;
    check_vmcore(out, reader, v);
    EXPECT_EQ(v.vmcoreinfo, reader.vmcoreinfo());
    EXPECT_EQ(v.image_loads, reader.kernel_image_mapping() ? 1u : 0u);
    EXPECT_EQ(v.prstatus, reader.vcpus().size());
    const fs::path installed = fs::path("/usr/lib/debug/boot") / ("vmlinux-" + std::string(kRelease));
    if (!fs::exists(installed) || run({"sh", "-c", "command -v crash"}).exit_code != 0)
        GTEST_SKIP() << "crash or " << installed << " is not installed";
    auto c = run({"sh", "-c", "printf 'sys\\nquit\\n' | timeout 600 crash -s \"$0\" \"$1\"", installed.string(),
                  out.string()});
    ASSERT_EQ(c.exit_code, 0) << c.err << c.out;
    EXPECT_TRUE(std::regex_search(c.out, std::regex("RELEASE: 6\\.1\\.0-57-amd64"))) << c.out;
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

// Issue 32 item 1: a guest whose kernel release is an absolute path, and one
// whose release climbs out with "..", dumped as the service dumps them. The
// release is recorded escaped as KERNEL_UNTRUSTED=, never KERNEL=; debug
// refuses it (no path, no -dbg package, no debuginfod fetch) and asks for
// --vmlinux, which still works; info shows it escaped and "(untrusted)",
// JSON raw with release_trusted false; dmesg shows the guest's controls escaped.
struct HostileDump {
    TempDir dir;
    fs::path image = dir / "linux.raw", dump = dir / "hostile.core";
    std::unique_ptr<sim::Host> host;
    explicit HostileDump(std::string_view release) {
        const std::string ram = hostile_guest_ram(release);
        std::ofstream(image, std::ios::binary).write(ram.data(), static_cast<std::streamsize>(ram.size()));
        constexpr uint64_t kPages = (128ULL << 20) / 4096;
        json d = dump::hvm_domain(22, "hvm", kPages, json::array({json::array({0, 0x800000, kPages})}));
        d["memory"] = json{{"image", image.string()}};
        host = std::make_unique<sim::Host>(dump::host_spec({d}));
        dump_domain_to_file(*host->hv, 22, dump);
    }
};

// Output a terminal shows as the guest chose: a control that redraws, a
// bidi control or a C1 control.
bool has_raw_control(const std::string& text) {
    for (std::string_view c : {"\x1b", "\r", "\v", "\f", "\xe2\x80\xae", "\xc2\x9b"})
        if (text.find(c) != std::string::npos) return true;
    return false;
}

TEST(CtlDebugUntrusted, AReleaseThatIsAPathNamesNoFileAndIsShownUntrusted) {
    for (const std::string release : {"/tmp/abcdefghi", "../../../tmp/x"}) {
        SCOPED_TRACE(release);
        HostileDump h(release);
        const DumpReader r = DumpReader::open(h.dump);
        EXPECT_FALSE(r.domain().contains(keys::kKernel));
        EXPECT_EQ(r.domain().get(keys::kKernelUntrusted), release);

        // Where the old code looked: "../../../tmp/x" under the root's
        // modules directory is ROOT/usr/lib/tmp/x/vmlinux; a file is planted there.
        TempDir root, bin;
        const fs::path planted = root / "usr/lib/tmp/x/vmlinux";
        fs::create_directories(planted.parent_path());
        std::ofstream(planted) << "planted";
        std::ofstream(bin / "debuginfod-find") << "#!/bin/sh\ntouch \"$(dirname \"$0\")/called\"\necho /bin/sh\n";
        fs::permissions(bin / "debuginfod-find", fs::perms::owner_all);
        const std::vector<std::string> env = {"XENDUMP_DEBUG_ROOT=" + root.path().string(),
                                              "PATH=" + bin.path().string() + ":/usr/bin:/bin",
                                              "DEBUGINFOD_URLS=https://debuginfod.example"};
        for (const char* debugger : {"crash", "gdb", "drgn"}) {
            auto d = run({"xen-dumpctl", "debug", "--print-command", "--debugger", debugger, h.dump.string()}, env);
            EXPECT_EQ(d.exit_code, 1) << d.out;
            EXPECT_EQ(d.out, "");
            EXPECT_NE(d.err.find(release + " (untrusted)"), std::string::npos) << d.err;
            EXPECT_NE(d.err.find("--vmlinux"), std::string::npos) << d.err;
            EXPECT_EQ(d.err.find("linux-image-"), std::string::npos) << d.err;
            EXPECT_FALSE(fs::exists(bin / "called")) << "debuginfod was asked";
        }
        std::ofstream(h.dir / "vmlinux") << "x";
        auto given = run({"xen-dumpctl", "debug", "--print-command", "--vmlinux", (h.dir / "vmlinux").string(),
                          h.dump.string()}, env);
        EXPECT_EQ(given.exit_code, 0) << given.err;
        EXPECT_EQ(given.out, "crash " + (h.dir / "vmlinux").string() + " " + h.dump.string() + "\n");

        auto info = run({"xen-dumpctl", "info", h.dump.string()});
        ASSERT_EQ(info.exit_code, 0) << info.err;
        EXPECT_NE(info.out.find("\nKernel:       " + release + " (untrusted): not a release name"), std::string::npos)
            << info.out;
        EXPECT_NE(info.out.find("\nCrash report: " + std::string(kHostilePanicLine) + "\n"), std::string::npos)
            << info.out;
        EXPECT_FALSE(has_raw_control(info.out)) << info.out;
        auto info_json = run({"xen-dumpctl", "info", "--json", h.dump.string()});
        ASSERT_EQ(info_json.exit_code, 0) << info_json.err;
        const json k = json::parse(info_json.out).at("kernel");
        EXPECT_EQ(k.at("release"), release);
        EXPECT_EQ(k.at("release_trusted"), false);

        auto dmesg = run({"xen-dumpctl", "dmesg", h.dump.string()});
        ASSERT_EQ(dmesg.exit_code, 0) << dmesg.err;
        EXPECT_NE(dmesg.out.find("\n" + std::string(kHostilePanicLine) + "\n"), std::string::npos);
        EXPECT_NE(dmesg.out.find("Linux version " + release), std::string::npos);
        EXPECT_FALSE(has_raw_control(dmesg.out));
        auto bt = run({"xen-dumpctl", "backtrace", h.dump.string()});
        EXPECT_EQ(bt.exit_code, 0) << bt.err;
        EXPECT_FALSE(has_raw_control(bt.out));
    }
}

}  // namespace
}  // namespace xendump::test
