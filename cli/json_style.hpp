// --json[=short|pretty] of the programs that print JSON (xen-dumpctl's
// verbs, xen-dumpd --estimate): text when not given; else JSON, indented
// (plain --json and pretty) or on one line (short).
#pragma once

#include "cli_options.hpp"

namespace xendump::cli {

struct JsonStyle {
    bool on = false;
    int indent = 2;  // for nlohmann::json::dump: -1 one line
    explicit operator bool() const { return on; }
};

// --json from `p` (its table has the row). Throws UsageError for a value
// other than short or pretty.
JsonStyle json_style(const Parsed& p);

}  // namespace xendump::cli
