// Text that may hold any bytes (a guest's domain name, its kernel's log and
// release) written where it must stay one line and be safe on a terminal:
// NT_XEN_DOMAIN values, log lines, the dmesg text and the tables of
// xen-dumpctl. The one rule for every human-readable output of guest text
// (xen-dumpctl(1) "TEXT FROM THE GUEST"); JSON outputs keep the raw string.
// The escaping is reversible.
#pragma once

#include <string>
#include <string_view>

namespace xendump {

// Escaped: the C0 controls but tab (so \r, \v, \f, ESC), DEL, the C1 range
// U+0080-U+009F, the bidirectional controls U+200E/U+200F, U+202A-U+202E and
// U+2066-U+2069, the separators U+2028/U+2029, and bytes that are not UTF-8;
// they become \n, \r or \xNN (lower-case hex, one per byte), and a
// backslash becomes \\. Tab, printable ASCII and other valid UTF-8 stay as
// they are. The result holds no newline, NUL, escape sequence or reordering
// mark.
std::string escape_text(std::string_view text);

// The inverse of escape_text. A backslash that starts no escape is kept as it
// is (values written before escaping was introduced read unchanged unless
// they hold one of the sequences above).
std::string unescape_text(std::string_view text);

// Text an earlier writer escaped (escape_text of this or an older version,
// or the "\xNN" of an older dmesg line) under today's rule:
// escape_text(unescape_text(text)); unchanged when today's rule wrote it.
std::string reescape_text(std::string_view text);

bool is_utf8(std::string_view text);  // JSON strings must be

}  // namespace xendump
