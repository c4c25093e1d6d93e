// xen-dumpctl debug [MATCH...]: starts a debugger (crash, gdb or drgn) on a
// dump, as `coredumpctl debug` does, with the guest kernel's debug vmlinux
// found by the release the dump records (KERNEL= in its domain note, else
// the release found in its pages): /usr/lib/debug/boot/vmlinux-RELEASE or
// /usr/lib/debug/lib/modules/RELEASE/vmlinux (Debian's linux-image-*-dbg),
// or --vmlinux FILE. crash opens our dumps as kdump vmcores (xen-dump-core(5)),
// so no --kaslr or other flag is added for any guest type.
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
#include "debug_command.hpp"
#include "dump_selection.hpp"
#include "guest_kernel.hpp"
#include "xendump/error.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

namespace fs = std::filesystem;

std::vector<fs::path> vmlinux_candidates(const std::string& release, const fs::path& root) {
    return {root / "usr/lib/debug/boot" / ("vmlinux-" + release),
            root / "usr/lib/debug/lib/modules" / release / "vmlinux"};
}

fs::path find_vmlinux(const std::string& release, const fs::path& root) {
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

constexpr std::string_view kUsage =
    "xen-dumpctl debug [--debugger=crash|gdb|drgn] [--vmlinux FILE] [-A ARGS] [--print-command] [-S TIME] [-U TIME] "
    "[-r] [-1 | -n N] [--dump-dir DIR] [--config FILE] FILE|MATCH...";

std::vector<std::string> split_words(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

std::string kernel_release(const fs::path& dump) {
    const DumpReader r = DumpReader::open(dump);
    if (auto k = r.domain().get(keys::kKernel); k && !k->empty()) return *k;
    // Dumps written before KERNEL= existed, and converted xl files: look in the pages.
    std::string release = find_dump_kernel(r).release;
    if (release.empty())
        throw Error("the dump records no guest kernel release (no KERNEL= in its domain note, no Linux kernel "
                    "found in its pages): give --vmlinux FILE",
                    dump.string());
    return release;
}

}  // namespace

int cmd_debug(Args args) {
    auto a = parse_file_command(args, {"--print-command"}, {"--vmlinux", "--debugger", "-A"}, false);
    const ParsedArgs& p = a.p;
    if (p.help) {
        std::printf("usage: %.*s\n\nStart a debugger on a dump (the latest one MATCH selects that has a file), with\n"
                    "the guest kernel's debug vmlinux found by the release the dump records:\n"
                    "/usr/lib/debug/boot/vmlinux-RELEASE or /usr/lib/debug/lib/modules/RELEASE/vmlinux\n"
                    "(Debian: the package linux-image-RELEASE-dbg).\n"
                    "  --debugger NAME   crash (the default: crash ARGS VMLINUX DUMP), gdb\n"
                    "                    (gdb ARGS VMLINUX DUMP) or drgn (drgn -c DUMP -s VMLINUX ARGS)\n"
                    "  --vmlinux FILE    the kernel's debug image, instead of looking for it\n"
                    "  -A ARGS           more arguments for the debugger (split on white space)\n"
                    "  --print-command   print the command line instead of running it\n%s",
                    static_cast<int>(kUsage.size()), kUsage.data(), kSelectionHelp);
        return cli::kExitOk;
    }
    if (!a.error.empty()) return usage_error("debug", a.error, kUsage);
    const std::string debugger = p.value("--debugger").value_or("crash");
    if (debugger != "crash" && debugger != "gdb" && debugger != "drgn")
        return usage_error("debug", "unknown debugger '" + debugger + "' (crash, gdb or drgn)", kUsage);
    std::vector<std::string> extra;
    for (const auto& [name, value] : p.values)
        if (name == "-A")
            for (auto& w : split_words(value)) extra.push_back(std::move(w));

    const fs::path dump = one_dump(a);
    fs::path vmlinux;
    if (auto v = p.value("--vmlinux")) {
        vmlinux = *v;
        std::error_code ec;
        if (!fs::is_regular_file(vmlinux, ec)) throw Error("no such file (--vmlinux)", vmlinux.string());
    } else {
        const char* root = std::getenv("XENDUMP_DEBUG_ROOT");
        vmlinux = find_vmlinux(kernel_release(dump), root && *root ? fs::path(root) : fs::path("/"));
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
