// Minimal option scanning shared by the subcommands: flags, options with a
// value ("--since V", "--since=V", "-S V", "-SV"), --help, and positional
// operands; anything unknown is a usage error (exit 2).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "commands.hpp"

namespace xendump::ctl {

struct ParsedArgs {
    std::vector<std::string> flags;      // given flags, e.g. "--json"
    std::vector<std::pair<std::string, std::string>> values;  // given options with a value, in order
    std::vector<std::string> operands;   // everything else
    bool help = false;
    std::string error;                   // non-empty on a usage error

    bool has(std::string_view flag) const;
    // The last value given to `name` or to its other spelling `alias`.
    std::optional<std::string> value(std::string_view name, std::string_view alias = {}) const;
};

// `known` lists the flags the subcommand accepts ("--json", ...), `with_value`
// the options that take a value ("--since", "-S", ...).
ParsedArgs parse_args(Args args, const std::vector<std::string_view>& known,
                      const std::vector<std::string_view>& with_value = {});

// Prints "xen-dumpctl NAME: MESSAGE" and the usage line to stderr; returns 2.
int usage_error(std::string_view command, const std::string& message, std::string_view usage);

}  // namespace xendump::ctl
