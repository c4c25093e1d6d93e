// The subcommands of xen-dumpctl. main.cpp runs the preamble they share
// (run_command): parse the command's options (option_tables.hpp), answer
// --help, refuse a bad command line (one line, exit 2), then prepare what the
// command's row asks for (Needs) and call the command with it. A command
// returns the exit status (cli::kExit*); an Error it throws is one line, exit 1.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dump_selection.hpp"
#include "options.hpp"
#include "service_options.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

// What a command needs before it runs.
enum class Needs {
    nothing,    // symbol: its operands are its own
    service,    // list, vacuum, status, cancel: the configuration, loaded before --help (list's names the dump directory)
    dump_files, // verify: every selected dump file (and the selected dumps whose file is gone)
    dump_path,  // debug: the one dump's path (it opens the dump only when it must find the kernel)
    dump,       // info, dmesg, estimate, backtrace, dump: the one dump, opened
};

// What the preamble hands a command.
struct Invocation {
    std::string_view verb;  // as typed ("bt" for backtrace)
    ParsedArgs p;
    JsonStyle json;         // --json[=short|pretty]
    ServiceArgs service;    // --config, --dump-dir, --socket (the configuration is loaded for Needs::service and a MATCH)
    Selection selection;    // MATCH and -S -U -r -1 -n, for a command that selects dumps
    Targets targets;        // Needs::dump_files
    std::filesystem::path dump_path;  // Needs::dump_path, Needs::dump: the FILE given, else the latest selected dump
    std::optional<DumpReader> dump;   // Needs::dump
    OpenOptions open;                 // -i, $XEN_DUMP_IDENTITY, --allow-insecure-identity (encrypted.hpp)
    // Needs::dump: the dump is encrypted and no identity was given (dump is empty): info shows what it can.
    std::optional<EncryptionInfo> locked;

    // "xen-dumpctl VERB: MESSAGE (see ...)" on stderr; returns 2.
    int usage(const std::string& message) const { return usage_error(verb, message); }
};

struct Command {
    std::string_view name;  // its row of verb_tables() holds its options and --help
    Needs needs;
    int (*run)(Invocation& c);
    // Checks the command's own options before the dump is looked for: a usage
    // error message, "" when fine (it may throw Error).
    std::string (*check)(const Invocation& c) = nullptr;
    // Needs::dump: runs on an encrypted dump without an identity (info);
    // other commands then stop with KeyNeeded (encrypted.hpp).
    bool without_key = false;
};

int cmd_info(Invocation& c);  // with c.locked: what an encrypted dump says without a key
int cmd_verify(Invocation& c);
int cmd_symbol(Invocation& c);
int cmd_dmesg(Invocation& c);
int cmd_debug(Invocation& c);
std::string check_debug(const Invocation& c);
int cmd_dump(Invocation& c);  // cmd_dump.cpp: a plain ELF vmcore of a dump
std::string check_dump(const Invocation& c);
int cmd_backtrace(Invocation& c);
int cmd_estimate(Invocation& c);
std::string check_estimate(const Invocation& c);
// The service's subcommands (cmd_list.cpp, cmd_vacuum.cpp, cmd_status.cpp, cmd_cancel.cpp).
int cmd_list(Invocation& c);
int cmd_vacuum(Invocation& c);
int cmd_status(Invocation& c);
int cmd_cancel(Invocation& c);
int cmd_config(Invocation& c);  // cmd_config.cpp: the merged configuration and where each value came from

}  // namespace xendump::ctl
