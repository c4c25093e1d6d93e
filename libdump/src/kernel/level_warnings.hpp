// What a dump level's selection says when the guest cannot support the level
// asked: "dump level N instead of M: WHY", one line per limit (xen-dumpd's
// and xen-dump-convert's warnings; the converter puts its input's name first).
#pragma once

#include <string>
#include <vector>

#include "xendump/kernel/dump_level.hpp"

namespace xendump::kernel {

inline std::vector<std::string> level_warnings(const PageSelection& sel, unsigned asked) {
    std::vector<std::string> lines;
    for (const std::string& why : sel.limits)
        lines.push_back("dump level " + std::to_string(sel.level) + " instead of " + std::to_string(asked) + ": " + why);
    return lines;
}

}  // namespace xendump::kernel
