#include "service_options.hpp"

#include "xendump/error.hpp"

#include <cstdio>
#include <filesystem>
#include <optional>

namespace xendump::ctl {

ServiceArgs parse_service_options(Args args) {
    ServiceArgs out;
    std::filesystem::path& config_file = out.config_file;
    config_file = daemon::default_config_file();
    daemon::ConfigOverrides& overrides = out.overrides;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string a = args[i];
        std::optional<std::string> value;
        std::string name = a;
        if (auto eq = a.find('='); a.starts_with("--") && eq != std::string::npos) {
            name = a.substr(0, eq);
            value = a.substr(eq + 1);
        }
        if (i > 0 && (name == "--config" || name == "--dump-dir" || name == "--socket")) {
            if (!value) {
                if (i + 1 >= args.size()) {
                    out.error = name + " needs a value";
                    return out;
                }
                value = args[++i];
            }
            if (name == "--config") config_file = *value;
            else if (name == "--dump-dir") overrides.dump_dir = std::filesystem::absolute(*value);
            else overrides.control_socket = std::filesystem::absolute(*value);
            continue;
        }
        out.rest.push_back(args[i]);
    }
    return out;
}

ServiceArgs parse_service_args(Args args, BadConfig bad) {
    ServiceArgs out = parse_service_options(args);
    if (out.error.empty()) load_service_config(out, bad);
    return out;
}

void load_service_config(ServiceArgs& out, BadConfig bad) {
    try {
        out.config = daemon::load_config(out.config_file);
    } catch (const Error& e) {
        // A broken file must not stop `status` or `list` (the service keeps
        // its old configuration on SIGHUP too): say so and use the defaults.
        out.config_error = e.what();
        out.config = daemon::Config::defaults();
        if (bad == BadConfig::warn)
            std::fprintf(stderr, "xen-dumpctl: warning: ignoring the configuration: %s\n", e.what());
    }
    out.overrides.apply(out.config);
}

}  // namespace xendump::ctl
