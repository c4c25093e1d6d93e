// "0x…" formatting for error messages and LAYOUT= values.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace xendump::legacy {

inline std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace xendump::legacy
