// Values of the configuration file: sizes ("512M", "2G", "15%"), durations
// ("30s", "5min", "2h", "7d", "1w") and booleans, parsed strictly so that a
// typo is refused with its line number instead of silently meaning zero.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace xendump::daemon {

// A size limit: absolute bytes, or a percentage of the filesystem's size.
struct SizeLimit {
    uint64_t bytes = 0;
    unsigned percent = 0;  // 1..100 when relative
    bool relative = false;
    // Resolves against the size of the filesystem holding the dump directory.
    uint64_t resolve(uint64_t filesystem_bytes) const;
    std::string to_string() const;
};

// "1024", "4K", "512M", "2G", "1T" (powers of 1024; an optional trailing "B"
// or "iB" is accepted). Throws Error naming the value.
uint64_t parse_bytes(std::string_view text);
// parse_bytes() or "N%" with 0 < N <= 100.
SizeLimit parse_size_limit(std::string_view text);
// "90" (seconds), "30s", "5min", "2h", "7d", "1w"; "0" disables.
std::chrono::seconds parse_duration(std::string_view text);
// yes/no, true/false, on/off, 1/0.
bool parse_bool(std::string_view text);
unsigned parse_unsigned(std::string_view text, unsigned max);

std::string format_duration(std::chrono::seconds d);

}  // namespace xendump::daemon
