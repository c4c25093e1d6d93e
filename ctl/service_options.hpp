// Options shared by the service's subcommands (list, vacuum, status, cancel):
// --config FILE, --dump-dir DIR, --socket PATH, which locate the dump
// directory and control socket as xen-dumpd itself would.
#pragma once

#include <string>
#include <vector>

#include "commands.hpp"
#include "config.hpp"

namespace xendump::ctl {

struct ServiceArgs {
    daemon::Config config;
    std::vector<char*> rest;  // the other arguments, for parse_args()
    std::string error;        // usage error
    Args args() const { return Args(rest.data(), rest.size()); }
};

// A bad configuration file is reported on stderr and the defaults are used.
ServiceArgs parse_service_args(Args args);

inline constexpr const char* kServiceOptionsUsage = "[--config FILE] [--dump-dir DIR] [--socket PATH]";

}  // namespace xendump::ctl
