// The command line of xen-dump-sim (cli/cli_options.hpp): one row per option;
// --help, man/xen-dump-sim.1 and completions/xen-dump-sim hold the same rows
// (tests/cli/options_test.cpp).
#pragma once

#include "cli_options.hpp"

namespace xendump::sim {

inline constexpr cli::Option kSimOptions[] = {
    {"json", 0, cli::Arg::none, "", "list and info: print JSON"},
    {"version", 0, cli::Arg::none, "", "the version"},
};

}  // namespace xendump::sim
