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
#include "identity.hpp"

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
    {"dump-dir", 'D', Arg::required, "DIR", "the dump directory (default: DumpDir= of the configuration)"},
    {"directory", 0, Arg::required, "DIR", "the same as --dump-dir (coredumpctl's spelling)"},
    {"config", 0, Arg::required, "FILE", "the service's configuration file"},
    {"socket", 0, Arg::required, "PATH", "the service's control socket (default: ControlSocket=;\nstatus and cancel)"},
};
// Which dumps (dump_selection.hpp).
inline constexpr Option kSelectionOptions[] = {
    {"since", 'S', Arg::required, "TIME", "only dumps started at or after TIME"},
    {"until", 'U', Arg::required, "TIME",
     "only dumps started at or before TIME\nTIME: YYYY-MM-DD [HH:MM[:SS]] [UTC], @SECONDS, now,\ntoday, yesterday, "
     "tomorrow, -2h, -30min, -1d, \"2h ago\" (local time\nunless UTC or Z is given, or --utc)"},
    {"reverse", 'r', Arg::none, "", "newest first"},
    {"", '1', Arg::none, "", "only the latest dump"},
    {"", 'n', Arg::required, "N", "only the latest N dumps"},
    {"file", 0, Arg::required, "FILE", "the dump file FILE, as a FILE operand (repeatable)"},
    {"utc", 0, Arg::none, "", "show times in UTC and read -S/-U in UTC (default: local time)"},
};
// list's own: coredumpctl's habits.
inline constexpr Option kListOwn[] = {
    {"no-legend", 0, Arg::none, "", "no heading line"},
    {"field", 'F', Arg::required, "FIELD",
     "print the values FIELD takes in the selected dumps, one a line,\neach once (FIELD as in FIELD=VALUE: DOMAIN, DOMID, TYPE, ...)"},
    {"group-by", 0, Arg::required, "FIELD",
     "one line per value of FIELD (SIGNATURE: per crash): how many dumps,\nthe first and the last, the domains, a panic line"},
    {"store", 0, Arg::required, "s3://BUCKET/PREFIX",
     "the dumps of the hosts that upload to s3://BUCKET/PREFIX\n(PREFIX/HOST/NAME), from their sidecars, with a HOST column"},
};
inline constexpr Option kNoLegendOption[] = {
    {"no-legend", 0, Arg::none, "", "no heading line"},
};
// --json, --json=short (one line), --json=pretty (indented; plain --json
// prints what it printed before the choice existed).
inline constexpr Option kJsonOption[] = {
    {"json", 0, Arg::optional, "short|pretty", "print JSON instead of text (short: on one line)"},
};

// The private keys of encrypted dumps (xen-dump-core(5) "Encrypted dumps"),
// for every command that reads a dump's contents: the rows xen-dump-convert
// has too (cli/identity.hpp).
using cli::kIdentityOptions;

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
inline constexpr Option kEstimateOwn[] = {
    {"dump-level", 0, Arg::required, "N", "also the row of dump level N (0-31), as a compact\ndump at that level would keep"},
};
// dump's own -r is --recipient, as for xen-dumpd and xen-dump-convert: its
// --reverse has no letter (join() gives the first row a letter).
inline constexpr Option kDumpOwn[] = {
    {"output", 'o', Arg::required, "FILE", "write the vmcore to FILE (required; '-': standard output)"},
    {"recipient", 'r', Arg::required, "RECIPIENT",
     "encrypt the vmcore to RECIPIENT (age1… or ssh-ed25519\n…; repeatable): FILE is an age file, which\n"
     "may then be a file on a disk even for an encrypted dump"},
    {"recipients-file", 'R', Arg::required, "FILE",
     "encrypt the vmcore to the recipients in FILE, one a\nline as age -R reads it (repeatable)"},
};
inline constexpr Option kVacuumOwn[] = {
    {"dry-run", 0, Arg::none, "", "print what would be removed, remove nothing"},
};

// One command of xen-dumpctl: its line in `xen-dumpctl --help`, and what
// `xen-dumpctl VERB --help` prints (options.hpp command_help): "usage: " USAGE, a
// blank line, HELP, the paragraph on MATCH (dump_selection.hpp) when the
// command takes the selection options, and its option lines. main.cpp runs
// the command through the same row (main.cpp kCommands: what it needs opened).
struct VerbTable {
    std::string_view verb;
    std::string_view summary;
    std::string_view usage;  // its first line is the usage line
    std::string_view help;   // ends with a newline; "{dump_dir}" stands for the dump directory
    std::vector<Option> options;

    // Whether the command selects dumps (-S, -U, -r, -1, -n and MATCH operands).
    bool selects() const {
        for (const auto& o : options)
            if (o.is("--since")) return true;
        return false;
    }
};

// The identity, selection and service options, which every command but
// symbol, list, vacuum, status and cancel takes, in its usage line.
#define XENDUMP_CTL_SELECTION_OF(REVERSE) "[-i FILE]... [--allow-insecure-identity] [-S TIME] [-U TIME] " REVERSE " [-1 | -n N] [--utc] [-D DIR] [--config FILE] [--file FILE] [FILE|MATCH...]"
#define XENDUMP_CTL_SELECTION XENDUMP_CTL_SELECTION_OF("[-r]")

inline constexpr std::string_view kBacktraceUsage =
    "xen-dumpctl backtrace [--json[=short|pretty]] " XENDUMP_CTL_SELECTION "\n       (bt is short for backtrace)";
inline constexpr std::string_view kBacktraceHelp =
    "Print a backtrace of every vcpu of the dump's guest (x86_64 Linux), from its\n"
    "saved registers and its kernel stack, with function+offset from the kernel's\n"
    "kallsyms: through the kernel's ORC unwind tables, else its frame pointers,\n"
    "else a scan of the stack whose \"?\" frames are mere return addresses.\n"
    "The vcpu that reported the crash in the kernel's log is marked.\n"
    "With --json, one JSON object: per vcpu the method, the frames (ip, sp,\n"
    "symbol, reliable), where user space was reached, why a walk stopped.\n"
    "Of the dumps MATCH selects (all of them without FILE or MATCH), the latest one\n"
    "that has a file is read.\n";

inline const std::vector<VerbTable>& verb_tables() {
    using cli::join;
    static const std::vector<VerbTable> tables = {
        {"info", "show what a dump file holds (domain, pages, vcpus, digests, guest kernel)",
         "xen-dumpctl info [--json[=short|pretty]] " XENDUMP_CTL_SELECTION,
         "Show the domain, pages, vcpus and metadata a dump file holds, and the\n"
         "guest kernel found in its pages: release, banner, KASLR offset, the kernel\n"
         "image segment, each vcpu's instruction pointer as symbol+offset, the\n"
         "crash reports (panic, Oops, BUG) of the kernel's log, and the top frames\n"
         "of the backtrace of the vcpu that reported the crash.\n"
         "Of the dumps MATCH selects (all of them without FILE or MATCH), the latest one\n"
         "that has a file is shown.\n"
         "With --json, one JSON object instead of text. An encrypted dump is read with\n"
         "the key of -i; without one, info shows its age header and its sidecar.\n",
         join({kJsonOption, kIdentityOptions, kSelectionOptions, kServiceOptions})},
        {"verify", "check a dump file against the format, digests included",
         "xen-dumpctl verify [--no-digests] [--allow-no-digests] [-q|--quiet] " XENDUMP_CTL_SELECTION,
         "Check dump files against the xen-dump-core format: ELF structure, notes,\n"
         "the PFN->GMFN table, PT_LOAD runs, section placement and the digests.\n"
         "A file without digests fails unless --allow-no-digests is given.\n"
         "Exit status 0 when every check passes, 1 otherwise. The OK line of a file\n"
         "accepted with --allow-no-digests says the pages were not checked.\n"
         "An encrypted file (NAME.core.age) is checked with the key of -i; without\n"
         "one its age header alone is checked, and the exit status is 3.\n"
         "Every dump MATCH selects is checked (-1 for the latest only); a selected dump\n"
         "whose file is gone is a failure (\"FILE: missing\").\n",
         join({kVerifyOwn, kIdentityOptions, kSelectionOptions, kServiceOptions})},
        {"symbol", "look up a guest kernel symbol by name or address (kallsyms in the dump)",
         "xen-dumpctl symbol [--json[=short|pretty]] [-i FILE]... [--allow-insecure-identity] FILE NAME|ADDRESS | --list FILE",
         "Look up a guest kernel symbol by name (per-cpu variables with or without\n"
         "the per_cpu__ prefix) or an address (hex) as symbol+offset, using the kallsyms\n"
         "tables found in the dump's pages. --list gives a System.map for tools that\n"
         "want one.\n",
         join({kJsonOption, kSymbolOwn, kIdentityOptions})},
        {"dmesg", "print the guest kernel's log (its printk buffer) from a dump",
         "xen-dumpctl dmesg [--json[=short|pretty]] " XENDUMP_CTL_SELECTION,
         "Print the guest kernel's log (its printk buffer, as dmesg shows it) from the\n"
         "dump, one \"[seconds.micros] text\" line per record, as makedumpfile prints the log.\n"
         "Needs the kernel's VMCOREINFO (in the dump's note, else found in its pages).\n"
         "With --json, one JSON object: the format, whether the log is partial and\n"
         "why, and the records (sequence, time_ns, level, facility, caller, text).\n"
         "Of the dumps MATCH selects (all of them without FILE or MATCH), the latest one\n"
    "that has a file is read.\n",
         join({kJsonOption, kIdentityOptions, kSelectionOptions, kServiceOptions})},
        {"estimate", "show what each dump level (makedumpfile -d) would keep of a dump's guest",
         "xen-dumpctl estimate [--dump-level N] [--json[=short|pretty]] " XENDUMP_CTL_SELECTION,
         "Show what each dump level (makedumpfile -d: bit 1 zero pages, 2 cache, 4 private\n"
         "cache, 8 user data, 16 free pages; 31 all) would keep of the dump's guest, and the pages\n"
         "and bytes of each class, as makedumpfile's memory usage report does. The classes come\n"
         "from the guest kernel's struct pages through its VMCOREINFO; without one only zero pages\n"
         "count. A level's kept pages are the pages of a compact dump at that level, zero pages\n"
         "included (each kept as the file's one shared zero page: the ZERO PAGES column), as\n"
         "info and list count them. With --json, one JSON object.\n"
         "Of the dumps MATCH selects (all of them without FILE or MATCH), the latest one\n"
    "that has a file is read.\n",
         join({kEstimateOwn, kJsonOption, kIdentityOptions, kSelectionOptions, kServiceOptions})},
        {"backtrace", "print a backtrace of every vcpu of the guest kernel in a dump", kBacktraceUsage, kBacktraceHelp,
         join({kJsonOption, kIdentityOptions, kSelectionOptions, kServiceOptions})},
        {"bt", "short for backtrace", kBacktraceUsage, kBacktraceHelp,
         join({kJsonOption, kIdentityOptions, kSelectionOptions, kServiceOptions})},
        {"debug", "start crash (or gdb, drgn) on a dump with the guest kernel's debug vmlinux",
         "xen-dumpctl debug [--debugger=crash|gdb|drgn] [--vmlinux FILE] [-A ARGS] [--print-command] "
         XENDUMP_CTL_SELECTION,
         "Start a debugger on a dump (the latest one MATCH selects that has a file; without\n"
         "FILE or MATCH, the latest dump), with\n"
         "the guest kernel's debug vmlinux found by the release the dump records:\n"
         "/usr/lib/debug/boot/vmlinux-RELEASE or /usr/lib/debug/lib/modules/RELEASE/vmlinux\n"
         "(Debian: the package linux-image-RELEASE-dbg); when none is there and\n"
         "DEBUGINFOD_URLS is set, debuginfod-find fetches it by the build id of the\n"
         "dump's VMCOREINFO.\n",
         join({kDebugOwn, kIdentityOptions, kSelectionOptions, kServiceOptions})},
        {"dump", "write a dump's pages as a plain ELF vmcore (-o FILE) for tools that want one",
         "xen-dumpctl dump -o FILE [-r RECIPIENT]... [-R FILE]... " XENDUMP_CTL_SELECTION_OF("[--reverse]"),
         "Write the pages of a dump (the latest one MATCH selects that has a file; without\n"
         "FILE or MATCH, the latest dump) as a\n"
         "plain ELF vmcore, for tools that want one: one PT_LOAD per run of pages\n"
         "(physical addresses), the kernel image PT_LOAD, and the notes crash, gdb and\n"
         "drgn read (NT_PRSTATUS of each vcpu, VMCOREINFO). The Xen notes and the digests\n"
         "stay in the dump. FILE appears only when complete; '-' writes to standard output.\n"
         "With -r/-R the vmcore is written encrypted (age) to those recipients; else the\n"
         "vmcore of an encrypted dump is its plaintext, written to a pipe only.\n"
         "Here -r is --recipient (as for xen-dumpd and xen-dump-convert): --reverse has\n"
         "no short form.\n",
         join({kDumpOwn, kIdentityOptions, kSelectionOptions, kServiceOptions})},
        {"list", "list the dumps in the dump directory or a store (time, domain, reason, size, result)",
         "xen-dumpctl list [--json[=short|pretty]] [--no-legend] [-F FIELD | --group-by FIELD] [--store s3://BUCKET/PREFIX] "
         "[-S TIME] [-U TIME] [-r] [-1 | -n N] [--utc] [--config FILE] [-D DIR] [--file FILE] [MATCH...]",
         "List the dumps in the dump directory ({dump_dir}), oldest first, their\n"
         "start times in local time (--utc: in UTC).\n"
         "With --store, the dumps the services of a fleet uploaded to S3-compatible\n"
         "storage (s3://BUCKET/PREFIX/HOST/NAME, [Upload] in xen-dumpd.conf(5)) instead:\n"
         "their sidecars' objects, one GET each, a HOST column after TIME (MATCH\n"
         "HOST=NAME; --group-by adds the hosts); a dump whose sidecar is not there\n"
         "yet is still being uploaded and is not listed.\n"
         "RESULT is ok, failed, refused or cancelled as the sidecar records it, or MISSING\n"
         "for a dump that was written but whose file is gone. --json prints a JSON array\n"
         "(\"missing\": true for MISSING). Exit status 1 when no dump is listed.\n",
         join({kJsonOption, kListOwn, kSelectionOptions, kServiceOptions})},
        {"vacuum", "apply the storage limits to the dump directory now",
         "xen-dumpctl vacuum [--dry-run] [--config FILE] [--dump-dir DIR]",
         "Remove dumps until the storage limits of the configuration hold: manual dumps\n"
         "before crash dumps, oldest first. The dump directory must exist.\n\n",
         join({kVacuumOwn, kServiceOptions})},
        {"status", "show what the running service dumps and what waits",
         "xen-dumpctl status [--json[=short|pretty]] [--no-legend] [--config FILE] [--socket PATH]",
         "Show the running and queued dumps of xen-dumpd.\n", join({kJsonOption, kNoLegendOption, kServiceOptions})},
        {"cancel", "cancel a queued or running dump of the service", "xen-dumpctl cancel [--config FILE] [--socket PATH] JOB",
         "Cancel a dump of xen-dumpd (JOB as shown by xen-dumpctl status).\n", join({kServiceOptions})},
        {"config", "show the service's configuration and where each value comes from",
         "xen-dumpctl config [--json[=short|pretty]] [--config FILE] [-D DIR] [--socket PATH]",
         "Show the configuration xen-dumpd reads: /etc/xen-dumpd.conf (or --config FILE),\n"
         "then its drop-ins FILE.d/*.conf in lexical order, merged as the service merges\n"
         "them, every key of [Dump] and the keys of each [Domain NAME], each with where its\n"
         "value comes from: FILE:LINE, the command line, or the default (and what the\n"
         "default means). A configuration that does not load is refused, naming FILE:LINE.\n",
         join({kJsonOption, kServiceOptions})},
    };
    return tables;
}

#undef XENDUMP_CTL_SELECTION
#undef XENDUMP_CTL_SELECTION_OF

// The row of one command (nullptr for an unknown one).
inline const VerbTable* verb_table(std::string_view verb) {
    for (const auto& t : verb_tables())
        if (t.verb == verb) return &t;
    return nullptr;
}

// The options of one command (empty for an unknown one).
inline const std::vector<Option>& verb_options(std::string_view verb) {
    static const std::vector<Option> none;
    const VerbTable* t = verb_table(verb);
    return t ? t->options : none;
}

}  // namespace xendump::ctl
