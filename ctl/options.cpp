#include "options.hpp"

#include <algorithm>
#include <cstdio>

#include "cli.hpp"

namespace xendump::ctl {

bool ParsedArgs::has(std::string_view flag) const {
    return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

ParsedArgs parse_args(Args args, const std::vector<std::string_view>& known) {
    ParsedArgs p;
    bool only_operands = false;
    for (size_t i = 1; i < args.size(); ++i) {
        std::string_view a = args[i];
        if (only_operands || a.empty() || a[0] != '-' || a == "-") {
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
