#include "service_options.hpp"

#include "xendump/error.hpp"

#include <cstdio>
#include <filesystem>

namespace xendump::ctl {

ServiceArgs service_options(const ParsedArgs& p) {
    ServiceArgs out;
    out.config_file = p.value("--config").value_or(daemon::default_config_file().string());
    if (auto v = p.value("--dump-dir")) out.overrides.dump_dir = std::filesystem::absolute(*v);
    if (auto v = p.value("--socket")) out.overrides.control_socket = std::filesystem::absolute(*v);
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
