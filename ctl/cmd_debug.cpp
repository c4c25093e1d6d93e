// xen-dumpctl debug [MATCH...]: starts a debugger (crash, gdb or drgn) on a
// dump, as `coredumpctl debug` does, with the guest kernel's debug vmlinux
// found by the release the dump records (KERNEL= in its domain note, else
// the release found in its pages; only a release name, kernel::is_release_name,
// never the path or the text a hostile guest reports): /usr/lib/debug/boot/vmlinux-RELEASE or
// /usr/lib/debug/lib/modules/RELEASE/vmlinux (Debian's linux-image-*-dbg),
// else, when DEBUGINFOD_URLS is set, from debuginfod by the build id of the
// dump's VMCOREINFO (debuginfod-find debuginfo BUILDID), or --vmlinux FILE. crash opens our dumps as kdump vmcores (xen-dump-core(5)),
// so no --kaslr or other flag is added for any guest type.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "encrypted.hpp"
#include "debug_command.hpp"
#include "dump_selection.hpp"
#include "guest_kernel.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/s3.hpp"
#include "xendump/fd.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

namespace fs = std::filesystem;

namespace {

// A release the guest chose that is no release name (xen-dumpctl(1) "Text
// from the guest"): it names no path, no package and nothing to fetch.
Error untrusted_release(const std::string& release) {
    return Error("the guest kernel's release the dump records, " + shown_release(release) +
                 ", is not a release name (one path component of [A-Za-z0-9._+~-]): the guest chose it, so it "
                 "names no debug vmlinux and nothing is fetched for it; give --vmlinux FILE");
}

}  // namespace

std::vector<fs::path> vmlinux_candidates(const std::string& release, const fs::path& root) {
    if (!kernel::is_release_name(release)) return {};  // "/tmp/x" or "../.." would leave the directory
    return {root / "usr/lib/debug/boot" / ("vmlinux-" + release),
            root / "usr/lib/debug/lib/modules" / release / "vmlinux"};
}

fs::path find_vmlinux(const std::string& release, const fs::path& root) {
    if (!kernel::is_release_name(release)) throw untrusted_release(release);
    const auto candidates = vmlinux_candidates(release, root);
    std::string tried;
    for (const auto& c : candidates) {
        std::error_code ec;
        if (fs::is_regular_file(c, ec)) return c;
        tried += (tried.empty() ? "" : ", ") + c.string();
    }
    throw Error("no debug vmlinux for the guest kernel " + release + " (tried " + tried + "): install linux-image-" +
                release + "-dbg (Debian) or the distribution's debug package of that kernel, or give --vmlinux FILE");
}

fs::path debuginfod_vmlinux(const std::string& build_id) {
    // A build id is hex digits (20 bytes for Linux); anything else is not passed on.
    if (build_id.empty() || build_id.size() % 2 || build_id.size() > 128 ||
        build_id.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        throw Error("not a build id: '" + build_id + "'");
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
    UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
    std::string tool = "debuginfod-find", what = "debuginfo";
    char* argv[] = {tool.data(), what.data(), const_cast<char*>(build_id.c_str()), nullptr};
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    write_end.reset();
    if (rc != 0)
        throw Error("no debug vmlinux from debuginfod for build id " + build_id + ": cannot run debuginfod-find: " +
                    std::strerror(rc) + (rc == ENOENT ? " (install debuginfod, or give --vmlinux FILE)" : ""));
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = util::retry_eintr([&] { return ::read(read_end.get(), buf, sizeof buf); });
        if (n <= 0) break;
        if (out.size() < 65536) out.append(buf, static_cast<size_t>(n));
    }
    int status = 0;
    util::retry_eintr([&] { return ::waitpid(pid, &status, 0); });
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.empty() || out.find('\n') != std::string::npos)
        throw Error("no debug vmlinux from debuginfod for build id " + build_id +
                    " (debuginfod-find debuginfo failed; DEBUGINFOD_URLS=" +
                    (std::getenv("DEBUGINFOD_URLS") ? std::getenv("DEBUGINFOD_URLS") : "") + ")");
    std::error_code ec;
    if (!fs::is_regular_file(out, ec)) throw Error("debuginfod-find gave no file for build id " + build_id, out);
    return out;
}

std::vector<std::string> debugger_command(const std::string& debugger, const fs::path& vmlinux, const fs::path& dump,
                                          const std::vector<std::string>& extra) {
    std::vector<std::string> cmd;
    if (debugger == "drgn") {
        cmd = {"drgn", "-c", dump.string(), "-s", vmlinux.string()};
        cmd.insert(cmd.end(), extra.begin(), extra.end());
        return cmd;
    }
    if (debugger != "crash" && debugger != "gdb")
        throw Error("unknown debugger '" + debugger + "' (crash, gdb or drgn)");
    // crash [OPTIONS] NAMELIST DUMPFILE; gdb [OPTIONS] PROGRAM CORE.
    cmd = {debugger};
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    cmd.push_back(vmlinux.string());
    cmd.push_back(dump.string());
    return cmd;
}

std::string shell_quote(const std::string& word) {
    constexpr std::string_view kSafe =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=./:,@%";
    if (!word.empty() && word.find_first_not_of(kSafe) == std::string::npos) return word;
    std::string out = "'";
    for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

namespace {

std::vector<std::string> split_words(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// What the dump records of its guest kernel: the release (KERNEL= in the
// domain note, else found in the pages) and the build id (BUILD-ID= of
// VMCOREINFO), either may be empty.
struct RecordedKernel {
    std::string release;
    std::string build_id;
};

RecordedKernel recorded_kernel(const fs::path& dump) {
    const DumpReader r = DumpReader::open(dump);
    RecordedKernel k;
    if (auto text = r.vmcoreinfo())
        if (auto info = kernel::Vmcoreinfo::parse(*text))
            if (auto id = info->build_id()) k.build_id = std::string(*id);
    if (auto noted = noted_release(r); !noted.empty()) {
        k.release = std::move(noted);
        return k;
    }
    // Dumps written before KERNEL= existed, and converted xl files: look in the pages.
    const DumpKernel found = find_dump_kernel(r);
    k.release = found.release;
    if (k.build_id.empty() && found.vmcoreinfo)
        if (auto id = found.vmcoreinfo->build_id()) k.build_id = std::string(*id);
    return k;
}

// The debug vmlinux for `k`: installed under `root`, else (DEBUGINFOD_URLS
// set) from debuginfod by the build id. Throws Error naming what was tried.
fs::path locate_vmlinux(const RecordedKernel& k, const fs::path& dump, const fs::path& root) {
    // A guest that reports a path for its release may be steering the
    // debugger to a file it planted: no path, no package and no debuginfod
    // fetch for such a dump (its build id is guest text too).
    if (!k.release.empty() && !kernel::is_release_name(k.release))
        throw untrusted_release(k.release).with_object(dump.string());
    const char* urls = std::getenv("DEBUGINFOD_URLS");
    const bool debuginfod = urls && *urls && !k.build_id.empty();
    if (k.release.empty() && !debuginfod)
        throw Error("the dump records no guest kernel release (no KERNEL= in its domain note, no Linux kernel "
                    "found in its pages)" +
                        std::string(k.build_id.empty() ? "" : " and DEBUGINFOD_URLS is not set") + ": give --vmlinux FILE",
                    dump.string());
    if (!k.release.empty()) {
        try {
            return find_vmlinux(k.release, root);
        } catch (const Error& e) {
            if (!debuginfod) throw;
            try {
                return debuginfod_vmlinux(k.build_id);
            } catch (const Error& d) {
                throw Error(std::string(e.what()) + "; " + d.what());
            }
        }
    }
    return debuginfod_vmlinux(k.build_id);
}

}  // namespace

std::string check_debug(const Invocation& c) {
    const std::string debugger = c.p.value("--debugger").value_or("crash");
    if (debugger != "crash" && debugger != "gdb" && debugger != "drgn")
        return "unknown debugger '" + debugger + "' (crash, gdb or drgn)";
    return {};
}

int cmd_debug(Invocation& c) {
    const ParsedArgs& p = c.p;
    const std::string debugger = p.value("--debugger").value_or("crash");
    std::vector<std::string> extra;
    for (const auto& value : p.values("-A"))
        for (auto& w : split_words(value)) extra.push_back(std::move(w));

    const fs::path& dump = c.dump_path;
    // crash, gdb and drgn open a file; an object of the store is read by
    // ranged GETs that they do not make.
    if (s3::is_url(dump.string()))
        throw Error("a debugger reads a local file, not an object of the store: copy it here first (aws s3 cp, "
                    "or xen-dumpctl dump -o FILE for a plain vmcore)",
                    dump.string());
    // crash, gdb and drgn read a file where it lies, with random access: an
    // encrypted dump's plaintext would have to be written out whole (a disk
    // file is what encryption keeps it from; in memory it is as large as the
    // dump). Refused, before any key is read (xen-dumpctl(1) "ENCRYPTED DUMPS").
    if (auto e = encryption_of(dump))
        throw Error(describe_encryption(*e) +
                        ": a debugger reads a plaintext file, which xen-dumpctl does not write for an encrypted dump; "
                        "use info, dmesg, backtrace and symbol with -i, or decrypt it with age -d where plaintext "
                        "may lie",
                    dump.string());
    fs::path vmlinux;
    if (auto v = p.value("--vmlinux")) {
        vmlinux = *v;
        std::error_code ec;
        if (!fs::is_regular_file(vmlinux, ec)) throw Error("no such file (--vmlinux)", vmlinux.string());
    } else {
        const char* root = std::getenv("XENDUMP_DEBUG_ROOT");
        vmlinux = locate_vmlinux(recorded_kernel(dump), dump, root && *root ? fs::path(root) : fs::path("/"));
    }
    const auto cmd = debugger_command(debugger, vmlinux, dump, extra);
    if (p.has("--print-command")) {
        std::string line;
        for (const auto& w : cmd) line += (line.empty() ? "" : " ") + shell_quote(w);
        std::printf("%s\n", line.c_str());
        return cli::kExitOk;
    }
    std::fflush(stdout);
    std::vector<char*> argv;
    for (const auto& w : cmd) argv.push_back(const_cast<char*>(w.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    const int err = errno;
    std::fprintf(stderr, "xen-dumpctl debug: cannot run %s: %s%s\n", argv[0], std::strerror(err),
                 err == ENOENT ? " (install it, or choose another with --debugger)" : "");
    return cli::kExitFailure;
}

}  // namespace xendump::ctl
