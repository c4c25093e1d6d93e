// xen-dumpctl: inspect and check dump files (and, through the service, dumps).
// One line per subcommand in kCommands; each lives in its own cmd_*.cpp.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "cli.hpp"
#include "cli_options.hpp"
#include "commands.hpp"
#include "option_tables.hpp"
#include "xendump_config.h"

namespace xendump::ctl {
namespace {

constexpr Command kCommands[] = {
    {"info", "show what a dump file holds (domain, pages, vcpus, digests, guest kernel)", cmd_info},
    {"verify", "check a dump file against the format, digests included", cmd_verify},
    {"symbol", "look up a guest kernel symbol by name or address (kallsyms in the dump)", cmd_symbol},
    {"dmesg", "print the guest kernel's log (its printk buffer) from a dump", cmd_dmesg},
    {"estimate", "show what each dump level (makedumpfile -d) would keep of a dump's guest", cmd_estimate},
    {"backtrace", "print a backtrace of every vcpu of the guest kernel in a dump", cmd_backtrace},
    {"bt", "short for backtrace", cmd_backtrace},
    {"debug", "start crash (or gdb, drgn) on a dump with the guest kernel's debug vmlinux", cmd_debug},
    {"dump", "write a dump's pages as a plain ELF vmcore (-o FILE) for tools that want one", cmd_dump},
    {"list", "list the dumps in the dump directory (time, domain, reason, size, result)", cmd_list},
    {"vacuum", "apply the storage limits to the dump directory now", cmd_vacuum},
    {"status", "show what the running service dumps and what waits", cmd_status},
    {"cancel", "cancel a queued or running dump of the service", cmd_cancel},
};

void print_help(std::FILE* out) {
    std::fprintf(out,
                 "usage: xen-dumpctl [--help] [--version] COMMAND [ARGS...]\n\n"
                 "Inspect Xen guest memory dumps.\n\nCommands:\n");
    for (const auto& c : kCommands)
        std::fprintf(out, "  %-10.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                     static_cast<int>(c.summary.size()), c.summary.data());
    std::fprintf(out, "\nOptions:\n%s", cli::options_help(kTopOptions).c_str());
    std::fprintf(out, "\nRun 'xen-dumpctl COMMAND --help' for a command's options.\n");
}

}  // namespace
}  // namespace xendump::ctl

int main(int argc, char** argv) {
    using namespace xendump;
    cli::Parsed top;
    try {
        top = cli::parse(ctl::kTopOptions, argc, argv, true);
    } catch (const cli::UsageError& e) {
        return cli::usage_error("xen-dumpctl", e.message);
    }
    if (top.help) {
        ctl::print_help(stdout);
        return cli::kExitOk;
    }
    if (top.has("--version")) {
        std::printf("xen-dumpctl %s\n", XENDUMP_VERSION);
        return cli::kExitOk;
    }
    if (top.operands.empty()) return cli::usage_error("xen-dumpctl", "no command given");
    // The command and its arguments: the operands, as given (nothing after the command was parsed).
    const int first = argc - static_cast<int>(top.operands.size());
    for (const auto& c : ctl::kCommands) {
        if (c.name != argv[first]) continue;
        // A bad input file or a failed operation: one line, exit 1.
        try {
            return c.run(ctl::Args(argv + first, static_cast<size_t>(argc - first)));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "xen-dumpctl %s: %s\n", argv[first], e.what());
            return cli::kExitFailure;
        }
    }
    return cli::usage_error("xen-dumpctl", "unknown command '" + std::string(argv[first]) + "'");
}
