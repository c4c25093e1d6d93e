#include "options.hpp"

#include <algorithm>
#include <cstdio>

#include "cli.hpp"

namespace xendump::ctl {

bool ParsedArgs::has(std::string_view flag) const {
    return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

std::optional<std::string> ParsedArgs::value(std::string_view name, std::string_view alias) const {
    for (auto it = values.rbegin(); it != values.rend(); ++it)
        if (it->first == name || (!alias.empty() && it->first == alias)) return it->second;
    return std::nullopt;
}

ParsedArgs parse_args(Args args, const std::vector<std::string_view>& known,
                      const std::vector<std::string_view>& with_value) {
    ParsedArgs p;
    bool only_operands = false;
    auto takes_value = [&](std::string_view name) {
        return std::find(with_value.begin(), with_value.end(), name) != with_value.end();
    };
    for (size_t i = 1; i < args.size(); ++i) {
        std::string_view a = args[i];
        // "--name=value", "-Xvalue" (X a one-letter option with a value), "--name value", "-X value".
        std::string_view name = a;
        std::optional<std::string> inline_value;
        if (!only_operands && a.starts_with("--") && a.find('=') != std::string_view::npos) {
            name = a.substr(0, a.find('='));
            inline_value = std::string(a.substr(a.find('=') + 1));
        } else if (!only_operands && a.size() > 2 && a[0] == '-' && a[1] != '-' && takes_value(a.substr(0, 2))) {
            name = a.substr(0, 2);
            inline_value = std::string(a.substr(2));
        }
        if (!only_operands && a.size() > 1 && a[0] == '-' && a != "--" && takes_value(name)) {
            if (!inline_value) {
                if (i + 1 >= args.size()) {
                    if (p.error.empty()) p.error = "option '" + std::string(name) + "' needs a value";
                    continue;
                }
                inline_value = std::string(args[++i]);
            }
            p.values.emplace_back(std::string(name), *inline_value);
        } else if (only_operands || a.empty() || a[0] != '-' || a == "-") {
            p.operands.emplace_back(a);
        } else if (a == "--") {
            only_operands = true;
        } else if (a == "--help" || a == "-h") {
            p.help = true;
        } else if (std::find(known.begin(), known.end(), a) != known.end()) {
            p.flags.emplace_back(a);
        } else if (p.error.empty()) {
            p.error = "unknown option '" + std::string(a) + "'";
        }
    }
    return p;
}

int usage_error(std::string_view command, const std::string& message, std::string_view usage) {
    std::fprintf(stderr, "xen-dumpctl %.*s: %s\nusage: %.*s\n", static_cast<int>(command.size()), command.data(),
                 message.c_str(), static_cast<int>(usage.size()), usage.data());
    return cli::kExitUsage;
}

}  // namespace xendump::ctl
