// Option parsing of the subcommands: the command's table (option_tables.hpp)
// through the shared parser (cli/cli_options.hpp); a usage error is one line
// pointing to the command's --help (exit 2).
#pragma once

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cli_options.hpp"
#include "json_style.hpp"
#include "option_tables.hpp"

namespace xendump::ctl {

using Args = std::span<char* const>;

// --json[=short|pretty] (cli/json_style.hpp).
using cli::JsonStyle;

// `j` on standard output, one line or indented as `style` says, and a newline.
// Strings that are not UTF-8 (guest names and text may be any bytes) get
// U+FFFD.
template <typename Json>
void print_json(const Json& j, JsonStyle style) {
    std::cout << j.dump(style.indent, ' ', false, Json::error_handler_t::replace) << "\n";
}

struct ParsedArgs : cli::Parsed {
    std::string error;  // non-empty on a usage error

    // The last value given to `name` (either spelling of its row; `alias` is
    // another row).
    std::optional<std::string> value(std::string_view name, std::string_view alias = {}) const;
    // --json[=short|pretty]. Sets error for another value.
    JsonStyle json();
};

// args[0] is the command's name; its table is verb_options(args[0]).
ParsedArgs parse_args(Args args);

// Prints "xen-dumpctl COMMAND: MESSAGE (see 'xen-dumpctl COMMAND --help')"; returns 2.
int usage_error(std::string_view command, const std::string& message);

// What `xen-dumpctl COMMAND --help` prints (option_tables.hpp VerbTable);
// `dump_dir` is the dump directory the text names.
std::string command_help(std::string_view command, const std::filesystem::path& dump_dir = {});

}  // namespace xendump::ctl
