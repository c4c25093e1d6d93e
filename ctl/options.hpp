// Option parsing of the subcommands: the command's table (option_tables.hpp)
// through the shared parser (cli/cli_options.hpp); a usage error is one line
// pointing to the command's --help (exit 2).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cli_options.hpp"
#include "commands.hpp"
#include "option_tables.hpp"

namespace xendump::ctl {

struct ParsedArgs : cli::Parsed {
    std::string error;  // non-empty on a usage error

    // The last value given to `name` (either spelling of its row; `alias` is
    // another row).
    std::optional<std::string> value(std::string_view name, std::string_view alias = {}) const;
    // The indentation for nlohmann::json::dump of --json[=short|pretty]:
    // -1 for short, else `plain` (what plain --json printed). Sets error for
    // another value.
    int json_indent(int plain = 2);
};

// args[0] is the command's name; its table is verb_options(args[0]).
ParsedArgs parse_args(Args args);

// Prints "xen-dumpctl COMMAND: MESSAGE (see 'xen-dumpctl COMMAND --help')"; returns 2.
int usage_error(std::string_view command, const std::string& message);

// The option lines of the command's --help.
std::string options_help(std::string_view command);

}  // namespace xendump::ctl
