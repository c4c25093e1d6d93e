#include "options.hpp"

#include "cli.hpp"
#include "dump_selection.hpp"

namespace xendump::ctl {

std::optional<std::string> ParsedArgs::value(std::string_view name, std::string_view alias) const {
    for (auto it = given.rbegin(); it != given.rend(); ++it)
        if (it->first->is(name) || (!alias.empty() && it->first->is(alias))) return it->second;
    return std::nullopt;
}

JsonStyle ParsedArgs::json() {
    try {
        return cli::json_style(*this);
    } catch (const cli::UsageError& e) {
        if (error.empty()) error = e.message;
        return {true, 2};
    }
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

std::string command_help(std::string_view command, const std::filesystem::path& dump_dir) {
    const VerbTable* t = verb_table(command);
    if (!t) return {};
    std::string help(t->help);
    constexpr std::string_view kDumpDir = "{dump_dir}";
    if (auto at = help.find(kDumpDir); at != std::string::npos) help.replace(at, kDumpDir.size(), dump_dir.string());
    return "usage: " + std::string(t->usage) + "\n\n" + help + (t->selects() ? std::string(kSelectionHelp) + "\n" : "") +
           cli::options_help(t->options);
}

}  // namespace xendump::ctl
