// One option parser for the four programs (issue 21 item 3): getopt_long from
// glibc under a table per program (or per xen-dumpctl verb). Each row says
// the long name, the short letter, whether it takes a value and its help
// line; the parser, the --help text and the tests (tests/cli: man page and
// bash completion hold every row) all read the same rows.
//
// What a user may type: clustered short options (-nq), "-o VALUE", "-oVALUE"
// and "-o=VALUE" (the '=' is dropped, as people type it), "--opt VALUE",
// "--opt=VALUE", "--" to end the options; options and operands may be mixed.
// A usage error is one line naming the bad option, pointing to --help; the
// programs exit 2 on it (kExitUsage).
//
// To add an option: one row in the program's table (daemon/options_table.cpp,
// ctl/option_tables.cpp, convert/options.cpp, sim/options_table.cpp), the
// code that reads it (Parsed::has/value), a line in the man page and a word
// in the completion; tests/cli/options_test.cpp checks the last two.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xendump::cli {

enum class Arg {
    none,      // a flag
    required,  // --opt VALUE, --opt=VALUE, -o VALUE, -oVALUE
    optional,  // --opt or --opt=VALUE only (and -oVALUE)
};

struct Option {
    std::string_view name;    // long name without "--" ("" when there is only the short one)
    char letter = 0;          // the short option, 0 when none
    Arg arg = Arg::none;
    std::string_view value;   // the value's name in --help ("FILE"); "" for a flag
    std::string_view help;    // one line (may hold '\n' for more lines)

    std::string long_spelling() const { return name.empty() ? std::string() : "--" + std::string(name); }
    std::string short_spelling() const { return letter ? std::string{'-', letter} : std::string(); }
    // "--name" when there is one, else "-x".
    std::string spelling() const { return name.empty() ? short_spelling() : long_spelling(); }
    // Whether `s` ("--name", "name", "-x" or "x") names this option.
    bool is(std::string_view s) const;
};

// A table made of several (shared rows plus a verb's own). A letter an
// earlier part's row has is dropped from the later rows, which keep their
// long names: a verb's own rows come first and win (xen-dumpctl dump -r is
// its --recipient, its --reverse has no letter; list -r is --reverse).
std::vector<Option> join(std::initializer_list<std::span<const Option>> parts);

struct Parsed {
    std::vector<std::pair<const Option*, std::optional<std::string>>> given;  // in command-line order
    std::vector<std::string> operands;
    bool help = false;  // --help or -h (handled by the program, after a clean parse)

    bool has(std::string_view option) const;
    // The last value given to `option` (either spelling), nullopt when not given
    // (or given without a value, for Arg::optional).
    std::optional<std::string> value(std::string_view option) const;
    // Every value given to `option`, in order.
    std::vector<std::string> values(std::string_view option) const;
    // The last value of `option` as a number from `min` to `max` (decimal
    // digits only), nullopt when not given. Throws UsageError "OPTION wants
    // a number from MIN to MAX, not 'VALUE'".
    std::optional<unsigned> number(std::string_view option, unsigned min, unsigned max) const;
};

struct UsageError {
    std::string message;  // "unknown option '--frob'"
};

// Parses argv[1..argc) against `table` (--help/-h are added unless the table
// has them). With `stop_at_operand` the first operand ends the options (the
// command of xen-dumpctl: the rest are operands). Throws UsageError.
Parsed parse(std::span<const Option> table, int argc, char* const* argv, bool stop_at_operand = false);

// The option lines of --help, from the table: "  -o, --output PATH  text"
// (-h, --help included).
std::string options_help(std::span<const Option> table);

// The table with the -h, --help row the parser adds.
std::vector<Option> with_help(std::span<const Option> table);

// Prints "PROGRAM: MESSAGE (see 'PROGRAM --help')" on stderr and returns
// kExitUsage. `program` may be "xen-dumpctl list".
int usage_error(std::string_view program, std::string_view message);

}  // namespace xendump::cli
