// xen-dumpctl: inspect and check dump files (and, through the service, dumps).
// One line per subcommand in kCommands (what it needs prepared, commands.hpp)
// and one in verb_tables() (its options and --help, option_tables.hpp); each
// lives in its own cmd_*.cpp. run_command is the preamble they share.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <string>
#include <string_view>

#include "cli.hpp"
#include "cli_options.hpp"
#include "commands.hpp"
#include "encrypted.hpp"
#include "option_tables.hpp"
#include "xendump/error.hpp"
#include "xendump_config.h"

namespace xendump::ctl {
namespace {

constexpr Command kCommands[] = {
    {"info", Needs::dump, cmd_info, nullptr, true},
    {"verify", Needs::dump_files, cmd_verify},
    {"symbol", Needs::nothing, cmd_symbol},
    {"dmesg", Needs::dump, cmd_dmesg},
    {"estimate", Needs::dump, cmd_estimate, check_estimate},
    {"backtrace", Needs::dump, cmd_backtrace},
    {"bt", Needs::dump, cmd_backtrace},
    {"debug", Needs::dump_path, cmd_debug, check_debug},
    {"dump", Needs::dump, cmd_dump, check_dump},
    {"list", Needs::service, cmd_list},
    {"vacuum", Needs::service, cmd_vacuum},
    {"status", Needs::service, cmd_status},
    {"cancel", Needs::service, cmd_cancel},
    {"config", Needs::service, cmd_config},
};

void print_help(std::FILE* out) {
    std::fprintf(out,
                 "usage: xen-dumpctl [--help] [--version] COMMAND [ARGS...]\n\n"
                 "Inspect Xen guest memory dumps.\n\nCommands:\n");
    for (const auto& c : verb_tables())
        std::fprintf(out, "  %-10.*s %.*s\n", static_cast<int>(c.verb.size()), c.verb.data(),
                     static_cast<int>(c.summary.size()), c.summary.data());
    std::fprintf(out, "\nOptions:\n%s", cli::options_help(kTopOptions).c_str());
    std::fprintf(out, "\nRun 'xen-dumpctl COMMAND --help' for a command's options.\n");
}

// verify wants a FILE or MATCH (or an option selecting the latest); a command
// that reads one dump takes the latest without one, as coredumpctl does, and
// one FILE at most. "" when fine.
std::string operand_error(const Selection& s, bool several) {
    if (several && s.matches.empty() && !s.any_option)
        return "expected at least one FILE or MATCH (or -1 for the latest dump)";
    if (!several && only_paths(s) && s.matches.size() > 1) return "expected one FILE";
    return {};
}

// The service's configuration, loaded: "" when it loads, else why not
// ("FILE:LINE: ...", naming the file).
std::string config_problem(ServiceArgs& sa) {
    try {
        load_service_config(sa);
        return {};
    } catch (const Error& e) {
        return e.what();
    }
}

// A configuration that does not load stops the command before anything is
// read or removed: one line naming FILE:LINE, exit 2 (as xen-dumpd refuses
// to start on it). Going on with the defaults would show another directory,
// as if the service's dumps were gone, or remove by limits nobody set.
int refuse_config(const Invocation& c, const std::string& problem) {
    std::fprintf(stderr, "xen-dumpctl %.*s: the configuration cannot be used: %s\n", static_cast<int>(c.verb.size()),
                 c.verb.data(), problem.c_str());
    return cli::kExitUsage;
}

// Parses the command's options; answers --help; refuses a bad command line
// or configuration (one line, exit 2) before anything is read; prepares what
// the command needs (cmd.needs) and runs it. args[0] is the command's name as typed.
int run_command(const Command& cmd, Args args) {
    Invocation c;
    c.verb = args[0];
    c.p = parse_args(args);
    if (!c.p.error.empty()) return c.usage(c.p.error);
    c.service = service_options(c.p);
    std::string problem;
    if (cmd.needs == Needs::service) problem = config_problem(c.service);
    if (c.p.help) {
        // Help is answered whatever the configuration (naming --dump-dir, else the default directory then).
        daemon::Config shown = c.service.loaded ? c.service.config : daemon::Config::defaults();
        if (!c.service.loaded) c.service.overrides.apply(shown);
        std::fputs(command_help(c.verb, shown.dump_dir).c_str(), stdout);
        return cli::kExitOk;
    }
    if (!problem.empty()) return refuse_config(c, problem);
    c.json = c.p.json();
    c.open = identity_options(c.p);
    if (!c.p.error.empty()) return c.usage(c.p.error);
    const bool reads_dumps = cmd.needs != Needs::nothing && cmd.needs != Needs::service;
    if (verb_table(c.verb)->selects()) {
        std::string error = selection_from_args(c.p, std::time(nullptr), c.selection);
        if (error.empty() && reads_dumps) error = operand_error(c.selection, cmd.needs == Needs::dump_files);
        if (!error.empty()) return c.usage(error);
    }
    if (cmd.check)
        if (const std::string error = cmd.check(c); !error.empty()) return c.usage(error);
    // A MATCH is looked for in the service's dump directory (a FILE is used as given).
    if (reads_dumps && !only_paths(c.selection))
        if (problem = config_problem(c.service); !problem.empty()) return refuse_config(c, problem);
    if (cmd.needs == Needs::dump_files) c.targets = resolve_targets(c.service, c.selection, true);
    if (cmd.needs == Needs::dump_path || cmd.needs == Needs::dump) {
        const Targets t = resolve_targets(c.service, c.selection, false);
        if (t.files.empty())
            throw Error("the dump file is missing (its sidecar records the dump, the file is gone)",
                        t.missing.back().string());
        c.dump_path = t.files.front();
    }
    if (cmd.needs == Needs::dump) {
        if (c.open.identity_files.empty() && cmd.without_key) c.locked = encryption_of(c.dump_path);
        if (!c.locked) c.dump.emplace(open_dump(c.dump_path, c.open));
    }
    return cmd.run(c);
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
        // A bad input file or a failed operation: one line, exit 1; an
        // encrypted dump without an identity: one line, exit 3.
        try {
            return ctl::run_command(c, ctl::Args(argv + first, static_cast<size_t>(argc - first)));
        } catch (const ctl::KeyNeeded& e) {
            std::fprintf(stderr, "xen-dumpctl %s: %s\n", argv[first], e.what());
            return ctl::kExitNeedsKey;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "xen-dumpctl %s: %s\n", argv[first], e.what());
            return cli::kExitFailure;
        }
    }
    return cli::usage_error("xen-dumpctl", "unknown command '" + std::string(argv[first]) + "'");
}
