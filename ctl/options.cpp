#include "options.hpp"

#include "cli.hpp"

namespace xendump::ctl {

std::optional<std::string> ParsedArgs::value(std::string_view name, std::string_view alias) const {
    for (auto it = given.rbegin(); it != given.rend(); ++it)
        if (it->first->is(name) || (!alias.empty() && it->first->is(alias))) return it->second;
    return std::nullopt;
}

int ParsedArgs::json_indent(int plain) {
    const auto v = value("--json");
    if (!v || *v == "pretty") return plain < 0 ? 2 : plain;
    if (*v == "short") return -1;
    if (error.empty()) error = "--json takes short or pretty, not '" + *v + "'";
    return plain;
}

ParsedArgs parse_args(Args args) {
    ParsedArgs p;
    const std::string_view verb = args.empty() ? std::string_view() : std::string_view(args[0]);
    try {
        static_cast<cli::Parsed&>(p) = cli::parse(verb_options(verb), static_cast<int>(args.size()), args.data());
    } catch (const cli::UsageError& e) {
        p.error = e.message;
    }
    return p;
}

int usage_error(std::string_view command, const std::string& message) {
    return cli::usage_error("xen-dumpctl " + std::string(command), message);
}

std::string options_help(std::string_view command) { return cli::options_help(verb_options(command)); }

}  // namespace xendump::ctl
