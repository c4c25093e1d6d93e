// The command line of xen-dumpctl (cli/cli_options.hpp): one table per
// command, made of the command's own rows and the shared ones (the dump
// directory, the selection of dumps). Each command parses, and prints its
// --help options, from verb_options(NAME); man/xen-dumpctl.1 and
// completions/xen-dumpctl hold the same rows (tests/cli/options_test.cpp).
// To add an option: a row below (in the command's own rows, or a shared
// row group), the code reading it in cmd_NAME.cpp, the man page, the
// completion.
#pragma once

#include <string_view>
#include <vector>

#include "cli_options.hpp"

namespace xendump::ctl {

using cli::Arg;
using cli::Option;

// xen-dumpctl itself, before the command.
inline constexpr Option kTopOptions[] = {
    {"version", 0, Arg::none, "", "the version"},
};

// Where the dumps are and where the service listens, as xen-dumpd finds
// them; every command but symbol takes all three (a script may pass the same
// set to each), each uses what it needs.
inline constexpr Option kServiceOptions[] = {
    {"dump-dir", 0, Arg::required, "DIR", "the dump directory (default: DumpDir= of the configuration)"},
    {"config", 0, Arg::required, "FILE", "the service's configuration file"},
    {"socket", 0, Arg::required, "PATH", "the service's control socket (default: ControlSocket=;\nstatus and cancel)"},
};
// Which dumps (dump_selection.hpp).
inline constexpr Option kSelectionOptions[] = {
    {"since", 'S', Arg::required, "TIME", "only dumps started at or after TIME"},
    {"until", 'U', Arg::required, "TIME",
     "only dumps started at or before TIME\nTIME: YYYY-MM-DD [HH:MM[:SS]] (UTC), @SECONDS, now,\ntoday, yesterday, "
     "tomorrow, -2h, -30min, -1d, \"2h ago\""},
    {"reverse", 'r', Arg::none, "", "newest first"},
    {"", '1', Arg::none, "", "only the latest dump"},
    {"", 'n', Arg::required, "N", "only the latest N dumps"},
};
// --json, --json=short (one line), --json=pretty (indented; plain --json
// prints what it printed before the choice existed).
inline constexpr Option kJsonOption[] = {
    {"json", 0, Arg::optional, "short|pretty", "print JSON instead of text (short: on one line)"},
};

inline constexpr Option kVerifyOwn[] = {
    {"no-digests", 0, Arg::none, "", "skip recomputing the page digests"},
    {"allow-no-digests", 0, Arg::none, "",
     "accept a file that has no digests (written with\nDigests=no or --no-digests, or an xl dump-core file)"},
    {"quiet", 'q', Arg::none, "", "print only failures, no progress bar"},
};
inline constexpr Option kSymbolOwn[] = {
    {"list", 0, Arg::none, "", "print every symbol, one \"ADDRESS TYPE NAME\" line each,\nlike /proc/kallsyms"},
};
inline constexpr Option kDebugOwn[] = {
    {"debugger", 0, Arg::required, "NAME",
     "crash (the default: crash ARGS VMLINUX DUMP), gdb\n(gdb ARGS VMLINUX DUMP) or drgn (drgn -c DUMP -s VMLINUX ARGS)"},
    {"vmlinux", 0, Arg::required, "FILE", "the kernel's debug image, instead of looking for it"},
    {"", 'A', Arg::required, "ARGS", "more arguments for the debugger (split on white space)"},
    {"print-command", 0, Arg::none, "", "print the command line instead of running it"},
};
inline constexpr Option kDumpOwn[] = {
    {"output", 'o', Arg::required, "FILE", "write the vmcore to FILE (required; '-': standard output)"},
};
inline constexpr Option kVacuumOwn[] = {
    {"dry-run", 0, Arg::none, "", "print what would be removed, remove nothing"},
};

struct VerbTable {
    std::string_view verb;
    std::vector<Option> options;
};

inline const std::vector<VerbTable>& verb_tables() {
    using cli::join;
    static const std::vector<VerbTable> tables = {
        {"info", join({kJsonOption, kSelectionOptions, kServiceOptions})},
        {"verify", join({kVerifyOwn, kSelectionOptions, kServiceOptions})},
        {"symbol", join({kJsonOption, kSymbolOwn})},
        {"dmesg", join({kJsonOption, kSelectionOptions, kServiceOptions})},
        {"estimate", join({kJsonOption, kSelectionOptions, kServiceOptions})},
        {"backtrace", join({kJsonOption, kSelectionOptions, kServiceOptions})},
        {"bt", join({kJsonOption, kSelectionOptions, kServiceOptions})},
        {"debug", join({kDebugOwn, kSelectionOptions, kServiceOptions})},
        {"dump", join({kDumpOwn, kSelectionOptions, kServiceOptions})},
        {"list", join({kJsonOption, kSelectionOptions, kServiceOptions})},
        {"vacuum", join({kVacuumOwn, kServiceOptions})},
        {"status", join({kJsonOption, kServiceOptions})},
        {"cancel", join({kServiceOptions})},
    };
    return tables;
}

// The table of one command (empty for an unknown one).
inline const std::vector<Option>& verb_options(std::string_view verb) {
    static const std::vector<Option> none;
    for (const auto& t : verb_tables())
        if (t.verb == verb) return t.options;
    return none;
}

}  // namespace xendump::ctl
