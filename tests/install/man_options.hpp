// Reading options out of man pages (mdoc source) and --help texts, so the
// install test can hold the two against each other and against the programs.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace xendump::test {

// Every option an mdoc page names with Fl ("Fl -config" is --config, "Fl o"
// is -o), mapped to whether the page gives it an argument: "Fl -config Ar
// file", or a group "Fl o , Fl -output Ar path" whose last member has one.
std::map<std::string, bool> options_in_mdoc(std::string_view mdoc);

// Every word the page marks as a command (Cm).
std::set<std::string> commands_in_mdoc(std::string_view mdoc);

// The section titles (Sh), in order.
std::vector<std::string> sections_in_mdoc(std::string_view mdoc);

// Options written in plain text (shell completions): "--word" or "-x" that
// start a word; "dump-core", "'-'" and "->" are not options.
std::set<std::string> options_in_text(std::string_view text);

// The options a --help text offers: options_in_text() outside parentheses,
// which hold remarks such as "(select it elsewhere with --host sim:DIR)"
// about other programs.
std::set<std::string> options_in_help(std::string_view help);

// The commands a --help text lists: the indented first words of the lines
// after a "Commands:" line, up to the next blank line.
std::vector<std::string> commands_in_help(std::string_view help);

}  // namespace xendump::test
