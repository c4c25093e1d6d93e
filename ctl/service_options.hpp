// Options shared by the service's subcommands (list, vacuum, status, cancel):
// --config FILE, --dump-dir DIR, --socket PATH, which locate the dump
// directory and control socket as xen-dumpd itself would.
#pragma once

#include <filesystem>
#include <string>

#include "config.hpp"
#include "options.hpp"

namespace xendump::ctl {

struct ServiceArgs {
    daemon::Config config;
    std::string config_error; // the configuration could not be loaded (config holds the defaults)
    std::filesystem::path config_file;  // --config, else the default
    daemon::ConfigOverrides overrides;  // --dump-dir, --socket
};

// What to do with a configuration that cannot be loaded (a bad line, a
// --config FILE that is missing or not a file): commands that only read (list,
// status, cancel) warn on stderr and go on with the defaults; a command that
// removes dumps (vacuum) refuses. Either way config_error says why and config
// holds the defaults.
enum class BadConfig { warn, refuse };

// --config, --dump-dir and --socket from the parsed command line, without
// loading the configuration yet: the file commands (info, verify, dmesg,
// debug, dump) read it only when a MATCH needs the dump directory, so a FILE
// operand works as it did without one.
ServiceArgs service_options(const ParsedArgs& p);
void load_service_config(ServiceArgs& sa, BadConfig bad = BadConfig::warn);

}  // namespace xendump::ctl
