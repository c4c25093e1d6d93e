// Overflow-safe range arithmetic and hex formatting for messages about
// untrusted file contents (STYLE: `max - off < size`, never `off + size > max`).
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "util/util.hpp"

namespace xendump::reader {

// True when [offset, offset + size) lies inside [0, limit).
inline bool range_inside(uint64_t offset, uint64_t size, uint64_t limit) {
    return offset <= limit && limit - offset >= size;
}

// a * b, or nullopt on overflow.
inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
    return r;
}

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
    return r;
}

using util::hex;

// "p_offset 0x1000 + p_filesz 0x2000 is past the end of the file (0x2800)"
inline std::string past_end(const char* off_name, uint64_t off, const char* size_name, uint64_t size,
                            uint64_t file_size) {
    return std::string(off_name) + " " + hex(off) + " + " + size_name + " " + hex(size) +
           " is past the end of the file (" + hex(file_size) + ")";
}

// `s` (bytes from the file) fit for a message: non-printable bytes, '"'
// and '\\' as \xNN, at most `max` bytes shown.
inline std::string printable(std::string_view s, size_t max = 64) {
    std::string out;
    for (size_t i = 0; i < s.size() && i < max; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            out += static_cast<char>(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        }
    }
    if (s.size() > max) out += "...";
    return out;
}

inline std::string quote_name(std::string_view s, size_t max = 64) { return '"' + printable(s, max) + '"'; }

}  // namespace xendump::reader
