// Text from guests (domain names) made safe for lines, logs and terminals,
// reversibly: see xendump/text.hpp.
#include "xendump/text.hpp"

#include <cstdio>

namespace xendump {

namespace {

// Length of the valid UTF-8 sequence at `s` (at most `left` bytes), 0 if invalid.
size_t utf8_length(const unsigned char* s, size_t left) {
    unsigned char c = s[0];
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || c > 0xF4 || len > left) return 0;
    for (size_t i = 1; i < len; ++i)
        if ((s[i] & 0xC0) != 0x80) return 0;
    // Overlong forms, surrogates and code points above U+10FFFF.
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
        (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return len;
}

// Code points that are valid UTF-8 yet change how a terminal or an editor
// shows the text around them: the bidirectional controls (U+200E/U+200F,
// U+202A-U+202E, U+2066-U+2069, Unicode UAX #9) reorder what follows, and the
// line and paragraph separators (U+2028/U+2029) break a line. All are
// E2 80 xx or E2 81 xx.
bool is_layout_control(const unsigned char* s, size_t len) {
    if (len != 3 || s[0] != 0xE2) return false;
    if (s[1] == 0x80) return s[2] == 0x8E || s[2] == 0x8F || (s[2] >= 0xA8 && s[2] <= 0xAE);
    return s[1] == 0x81 && s[2] >= 0xA6 && s[2] <= 0xA9;
}

}  // namespace

std::string escape_text(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    for (size_t i = 0; i < text.size();) {
        unsigned char c = s[i];
        if ((c >= 0x20 && c < 0x7F) || c == '\t') {
            if (c == '\\') out += '\\';
            out += static_cast<char>(c);
            ++i;
            continue;
        }
        size_t len = c >= 0x80 ? utf8_length(s + i, text.size() - i) : 0;
        const bool c1 = len == 2 && c == 0xC2 && s[i + 1] < 0xA0;  // U+0080-U+009F
        const bool control = c1 || is_layout_control(s + i, len);
        if (len > 0 && !control) {
            out.append(text.substr(i, len));
            i += len;
            continue;
        }
        const size_t bytes = control ? len : 1;
        for (size_t k = 0; k < bytes; ++k) {
            unsigned char b = s[i + k];
            if (b == '\n') out += "\\n";
            else if (b == '\r') out += "\\r";
            else {
                char buf[5];
                std::snprintf(buf, sizeof buf, "\\x%02x", b);
                out += buf;
            }
        }
        i += bytes;
    }
    return out;
}

std::string reescape_text(std::string_view text) { return escape_text(unescape_text(text)); }

bool is_utf8(std::string_view text) {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    for (size_t i = 0; i < text.size();) {
        size_t len = s[i] < 0x80 ? 1 : utf8_length(s + i, text.size() - i);
        if (len == 0) return false;
        i += len;
    }
    return true;
}

std::string unescape_text(std::string_view text) {
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c != '\\' || i + 1 >= text.size()) {
            out += c;
            continue;
        }
        char e = text[i + 1];
        if (e == '\\') out += '\\';
        else if (e == 'n') out += '\n';
        else if (e == 't') out += '\t';
        else if (e == 'r') out += '\r';
        else if (e == 'x' && i + 3 < text.size() && hex(text[i + 2]) >= 0 && hex(text[i + 3]) >= 0) {
            out += static_cast<char>(hex(text[i + 2]) * 16 + hex(text[i + 3]));
            i += 2;
        } else {
            out += c;  // not an escape: a backslash of an older writer, as it was
            continue;
        }
        ++i;
    }
    return out;
}

}  // namespace xendump
