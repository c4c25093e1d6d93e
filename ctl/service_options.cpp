#include "service_options.hpp"

#include "xendump/error.hpp"

#include <filesystem>

namespace xendump::ctl {

ServiceArgs service_options(const ParsedArgs& p) {
    ServiceArgs out;
    out.config_file = p.value("--config").value_or(daemon::default_config_file().string());
    if (auto v = p.value("--dump-dir", "--directory")) out.overrides.dump_dir = std::filesystem::absolute(*v);
    if (auto v = p.value("--socket")) out.overrides.control_socket = std::filesystem::absolute(*v);
    return out;
}

void load_service_config(ServiceArgs& out) {
    if (out.loaded) return;
    out.config = daemon::load_config(out.config_file);
    out.overrides.apply(out.config);
    out.loaded = true;
}

}  // namespace xendump::ctl
