#include "json_style.hpp"

namespace xendump::cli {

JsonStyle json_style(const Parsed& p) {
    JsonStyle s;
    s.on = p.has("--json");
    const auto v = p.value("--json");
    if (!v || *v == "pretty") return s;
    if (*v != "short") throw UsageError{"--json takes short or pretty, not '" + *v + "'"};
    s.indent = -1;
    return s;
}

}  // namespace xendump::cli
