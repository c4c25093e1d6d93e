// Minimal option scanning shared by the subcommands: flags, --help, and
// positional operands; anything unknown is a usage error (exit 2).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"

namespace xendump::ctl {

struct ParsedArgs {
    std::vector<std::string> flags;      // given flags, e.g. "--json"
    std::vector<std::string> operands;   // everything else
    bool help = false;
    std::string error;                   // non-empty on a usage error

    bool has(std::string_view flag) const;
};

// `known` lists the flags the subcommand accepts ("--json", ...).
ParsedArgs parse_args(Args args, const std::vector<std::string_view>& known);

// Prints "xen-dumpctl NAME: MESSAGE" and the usage line to stderr; returns 2.
int usage_error(std::string_view command, const std::string& message, std::string_view usage);

}  // namespace xendump::ctl
