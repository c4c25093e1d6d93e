#include "cli_options.hpp"

#include <getopt.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "cli.hpp"

namespace xendump::cli {

namespace {

constexpr Option kHelpOption{"help", 'h', Arg::none, "", "this help"};
// getopt_long's value for an option without a short letter: above any char.
constexpr int kLongOnlyBase = 0x1000;

}  // namespace

bool Option::is(std::string_view s) const {
    if (s.starts_with("--")) return !name.empty() && s.substr(2) == name;
    if (s.size() == 2 && s[0] == '-') return letter && s[1] == letter;
    if (s.size() == 1) return letter && s[0] == letter;
    return !name.empty() && s == name;
}

std::vector<Option> join(std::initializer_list<std::span<const Option>> parts) {
    std::vector<Option> out;
    for (const auto& p : parts)
        for (Option o : p) {
            if (o.letter && !o.name.empty() && std::any_of(out.begin(), out.end(), [&](const Option& e) { return e.letter == o.letter; }))
                o.letter = 0;
            out.push_back(o);
        }
    return out;
}

std::vector<Option> with_help(std::span<const Option> table) {
    std::vector<Option> out(table.begin(), table.end());
    if (std::none_of(out.begin(), out.end(), [](const Option& o) { return o.is("--help"); }))
        out.push_back(kHelpOption);
    return out;
}

bool Parsed::has(std::string_view option) const {
    return std::any_of(given.begin(), given.end(), [&](const auto& g) { return g.first->is(option); });
}

std::optional<std::string> Parsed::value(std::string_view option) const {
    for (auto it = given.rbegin(); it != given.rend(); ++it)
        if (it->first->is(option)) return it->second;
    return std::nullopt;
}

std::vector<std::string> Parsed::values(std::string_view option) const {
    std::vector<std::string> out;
    for (const auto& [o, v] : given)
        if (o->is(option) && v) out.push_back(*v);
    return out;
}

std::optional<unsigned> Parsed::number(std::string_view option, unsigned min, unsigned max) const {
    const auto v = value(option);
    if (!v) return std::nullopt;
    unsigned long long n = 0;
    bool ok = !v->empty() && v->size() <= 10;
    for (char c : *v) {
        ok = ok && c >= '0' && c <= '9';
        if (ok) n = n * 10 + static_cast<unsigned>(c - '0');
    }
    if (!ok || n < min || n > max)
        throw UsageError{std::string(option) + " wants a number from " + std::to_string(min) + " to " +
                         std::to_string(max) + ", not '" + *v + "'"};
    return static_cast<unsigned>(n);
}

Parsed parse(std::span<const Option> table_in, int argc, char* const* argv_in, bool stop_at_operand) {
    // Pointers into the caller's table (Parsed keeps them), and the help row.
    std::vector<const Option*> table;
    for (const auto& o : table_in) table.push_back(&o);
    if (std::none_of(table_in.begin(), table_in.end(), [](const Option& o) { return o.is("--help"); }))
        table.push_back(&kHelpOption);
    // getopt_long reorders its argv: give it a copy. "-" returns operands in
    // order (code 1), whatever POSIXLY_CORRECT says; ":" tells a missing value
    // from an unknown option.
    std::vector<char*> argv(argv_in, argv_in + argc);
    argv.push_back(nullptr);
    std::string shorts = "-:";
    std::vector<option> longs;
    std::vector<std::string> names;  // NUL-terminated copies for struct option
    names.reserve(table.size());
    for (size_t i = 0; i < table.size(); ++i) {
        const Option& o = *table[i];
        const int has_arg = o.arg == Arg::none ? no_argument : o.arg == Arg::required ? required_argument
                                                                                      : optional_argument;
        if (o.letter) {
            shorts += o.letter;
            if (o.arg == Arg::required) shorts += ':';
            if (o.arg == Arg::optional) shorts += "::";
        }
        names.emplace_back(o.name);
        if (!o.name.empty())
            longs.push_back({names.back().c_str(), has_arg, nullptr, o.letter ? o.letter : kLongOnlyBase + int(i)});
    }
    longs.push_back({nullptr, 0, nullptr, 0});
    auto by_val = [&](int val) -> const Option* {
        for (size_t i = 0; i < table.size(); ++i)
            if ((table[i]->letter && table[i]->letter == val) || (!table[i]->letter && val == kLongOnlyBase + int(i)))
                return table[i];
        return nullptr;
    };

    Parsed out;
    optind = 0;  // glibc: start afresh (a program may parse twice: xen-dumpctl, then its command)
    opterr = 0;
    for (;;) {
        const int c = getopt_long(argc, argv.data(), shorts.c_str(), longs.data(), nullptr);
        if (c == -1) break;
        // The element getopt just finished with (or is inside of, for a cluster).
        const char* elem = optind > 0 && optind <= argc ? argv[optind - 1] : "";
        const bool typed_long = std::string_view(elem).starts_with("--");
        if (c == 1) {
            out.operands.emplace_back(optarg);
            if (stop_at_operand) break;
            continue;
        }
        if (c == ':') {
            const Option* o = by_val(optopt);
            const std::string spelled = o ? (typed_long ? o->long_spelling() : o->short_spelling()) : elem;
            throw UsageError{"option '" + spelled + "' needs a value"};
        }
        if (c == '?') {
            const Option* o = optopt ? by_val(optopt) : nullptr;
            if (o && typed_long) throw UsageError{"option '" + o->long_spelling() + "' takes no value"};
            if (optopt && !typed_long) throw UsageError{"unknown option '-" + std::string(1, char(optopt)) + "'"};
            std::string_view given = elem;
            given = given.substr(0, given.find('='));
            std::string candidates;
            for (const Option* t : table)
                if (!t->name.empty() && given.size() > 2 && t->name.starts_with(given.substr(2)))
                    candidates += (candidates.empty() ? "" : ", ") + t->long_spelling();
            if (!candidates.empty())
                throw UsageError{"option '" + std::string(given) + "' is ambiguous (" + candidates + ")"};
            throw UsageError{"unknown option '" + std::string(given) + "'"};
        }
        const Option* o = by_val(c);
        if (!o) throw UsageError{"unknown option '" + std::string(elem) + "'"};
        std::optional<std::string> value;
        if (optarg) {
            std::string_view v = optarg;
            // "-o=FILE": the value was attached to a short option, '=' and all.
            if (!typed_long && optarg != elem && v.starts_with('=')) v.remove_prefix(1);
            value = std::string(v);
        }
        if (o->is("--help")) out.help = true;
        out.given.emplace_back(o, std::move(value));
    }
    for (int i = optind; i < argc; ++i) out.operands.emplace_back(argv[i]);
    return out;
}

std::string options_help(std::span<const Option> table_in) {
    const std::vector<Option> table = with_help(table_in);
    std::vector<std::pair<std::string, std::string_view>> rows;
    size_t width = 0;
    for (const auto& o : table) {
        std::string left = o.letter ? o.short_spelling() + (o.name.empty() ? "" : ", ") : "    ";
        left += o.long_spelling();
        if (o.arg == Arg::required) left += " " + std::string(o.value);
        if (o.arg == Arg::optional) left += (o.name.empty() ? "" : "[=") + std::string(o.value) + "]";
        width = std::max(width, left.size());
        rows.emplace_back(std::move(left), o.help);
    }
    width = std::min<size_t>(width, 26);
    std::string out;
    for (const auto& [left, help] : rows) {
        out += "  " + left;
        if (left.size() > width) out += "\n" + std::string(width + 2, ' ');
        else out += std::string(width - left.size(), ' ');
        out += "  ";
        // Continuation lines of the help line up under its first line.
        for (char ch : help) {
            out += ch;
            if (ch == '\n') out += std::string(width + 4, ' ');
        }
        out += "\n";
    }
    return out;
}

int usage_error(std::string_view program, std::string_view message) {
    std::fprintf(stderr, "%.*s: %.*s (see '%.*s --help')\n", static_cast<int>(program.size()), program.data(),
                 static_cast<int>(message.size()), message.data(), static_cast<int>(program.size()), program.data());
    return kExitUsage;
}

}  // namespace xendump::cli
