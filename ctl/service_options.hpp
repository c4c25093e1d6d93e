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
    bool loaded = false;                // load_service_config succeeded
    std::filesystem::path config_file;  // --config, else the default
    daemon::ConfigOverrides overrides;  // --dump-dir, --socket
};

// --config, --dump-dir and --socket from the parsed command line, without
// loading the configuration yet: the file commands (info, verify, dmesg,
// debug, dump) read it only when a MATCH needs the dump directory, so a FILE
// operand works as it did without one.
ServiceArgs service_options(const ParsedArgs& p);

// Loads the configuration (the file and its drop-ins) and applies --dump-dir
// and --socket; once is enough. A configuration that cannot be loaded (a bad
// line, a --config FILE that is missing or not a file) throws Error "FILE:LINE:
// why": every command refuses it (exit 2, see run_command), since going on
// with the defaults would list, select or remove in a directory and by
// limits that are not the service's, as if its dumps were gone.
void load_service_config(ServiceArgs& sa);

}  // namespace xendump::ctl
