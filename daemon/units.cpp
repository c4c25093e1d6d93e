#include "units.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "xendump/error.hpp"

namespace xendump::daemon {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

// Splits "512M" into 512 and "m"; refuses signs, blanks and missing digits.
uint64_t leading_number(std::string_view text, std::string& suffix, const char* what) {
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (end == text.data() || ec == std::errc::invalid_argument)
        throw Error(std::string("not a ") + what + ": \"" + std::string(text) + "\"");
    if (ec == std::errc::result_out_of_range)
        throw Error(std::string(what) + " too large: \"" + std::string(text) + "\"");
    suffix = lower(std::string_view(end, static_cast<size_t>(text.data() + text.size() - end)));
    return value;
}

uint64_t checked_multiply(uint64_t value, uint64_t factor, std::string_view text, const char* what) {
    if (factor != 0 && value > std::numeric_limits<uint64_t>::max() / factor)
        throw Error(std::string(what) + " too large: \"" + std::string(text) + "\"");
    return value * factor;
}

}  // namespace

uint64_t SizeLimit::resolve(uint64_t filesystem_bytes) const {
    if (!relative) return bytes;
    // percent <= 100, so this cannot overflow for filesystems below 2^57 bytes;
    // divide first for larger ones.
    if (filesystem_bytes > (uint64_t{1} << 56)) return filesystem_bytes / 100 * percent;
    return filesystem_bytes * percent / 100;
}

std::string SizeLimit::to_string() const {
    return relative ? std::to_string(percent) + "%" : std::to_string(bytes);
}

uint64_t parse_bytes(std::string_view text) {
    std::string suffix;
    uint64_t value = leading_number(text, suffix, "size");
    if (suffix.size() > 1 && (suffix.ends_with("ib") || suffix.ends_with("b")))
        suffix.erase(suffix.size() - (suffix.ends_with("ib") ? 2 : 1));
    uint64_t factor = 1;
    if (suffix.empty() || suffix == "b") factor = 1;
    else if (suffix == "k") factor = uint64_t{1} << 10;
    else if (suffix == "m") factor = uint64_t{1} << 20;
    else if (suffix == "g") factor = uint64_t{1} << 30;
    else if (suffix == "t") factor = uint64_t{1} << 40;
    else throw Error("unknown size suffix in \"" + std::string(text) + "\" (use K, M, G, T or %)");
    return checked_multiply(value, factor, text, "size");
}

SizeLimit parse_size_limit(std::string_view text) {
    SizeLimit limit;
    if (text.ends_with('%')) {
        std::string suffix;
        uint64_t pct = leading_number(text.substr(0, text.size() - 1), suffix, "percentage");
        if (!suffix.empty() || pct == 0 || pct > 100)
            throw Error("percentage must be 1% to 100%: \"" + std::string(text) + "\"");
        limit.relative = true;
        limit.percent = static_cast<unsigned>(pct);
        return limit;
    }
    limit.bytes = parse_bytes(text);
    return limit;
}

std::chrono::seconds parse_duration(std::string_view text) {
    std::string suffix;
    uint64_t value = leading_number(text, suffix, "duration");
    uint64_t factor = 0;
    if (suffix.empty() || suffix == "s" || suffix == "sec") factor = 1;
    else if (suffix == "m" || suffix == "min") factor = 60;
    else if (suffix == "h") factor = 3600;
    else if (suffix == "d") factor = 86400;
    else if (suffix == "w") factor = 7 * 86400;
    else throw Error("unknown time unit in \"" + std::string(text) + "\" (use s, min, h, d or w)");
    uint64_t secs = checked_multiply(value, factor, text, "duration");
    if (secs > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error("duration too large: \"" + std::string(text) + "\"");
    return std::chrono::seconds(static_cast<int64_t>(secs));
}

bool parse_bool(std::string_view text) {
    std::string v = lower(text);
    if (v == "yes" || v == "true" || v == "on" || v == "1") return true;
    if (v == "no" || v == "false" || v == "off" || v == "0") return false;
    throw Error("not a boolean (yes/no): \"" + std::string(text) + "\"");
}

unsigned parse_unsigned(std::string_view text, unsigned max) {
    std::string suffix;
    uint64_t value = leading_number(text, suffix, "number");
    if (!suffix.empty()) throw Error("not a number: \"" + std::string(text) + "\"");
    if (value > max)
        throw Error("must be at most " + std::to_string(max) + ": \"" + std::string(text) + "\"");
    return static_cast<unsigned>(value);
}

std::string format_duration(std::chrono::seconds d) {
    auto s = d.count();
    if (s != 0 && s % 86400 == 0) return std::to_string(s / 86400) + "d";
    if (s != 0 && s % 3600 == 0) return std::to_string(s / 3600) + "h";
    if (s != 0 && s % 60 == 0) return std::to_string(s / 60) + "min";
    return std::to_string(s) + "s";
}

}  // namespace xendump::daemon
