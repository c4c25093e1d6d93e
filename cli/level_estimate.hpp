// What each dump level would keep of a guest (`makedumpfile --mem-usage`),
// printed the same way by `xen-dumpctl estimate FILE` (a dump file) and
// `xen-dumpd --domain N --estimate` (a live guest).
#pragma once

#include <string>

#include "json_style.hpp"
#include "xendump/kernel/dump_level.hpp"

namespace xendump::cli {

// Prints `e` for `source` (a dump file's path, or "domain NAME (ID)") on
// standard output, as text or JSON; `seconds` is the classification's time.
void print_level_estimate(const kernel::DumpLevelEstimate& e, const std::string& source, JsonStyle json,
                          double seconds);

}  // namespace xendump::cli
