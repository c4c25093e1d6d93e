// Text that may hold any bytes (a guest's domain name) written where it must
// stay one line and be safe on a terminal: NT_XEN_DOMAIN values, log lines,
// the tables of xen-dumpctl. The escaping is reversible.
#pragma once

#include <string>
#include <string_view>

namespace xendump {

// Control characters (C0, DEL and the C1 range U+0080-U+009F) and bytes that
// are not UTF-8 become \n, \t, \r or \xNN (lower-case hex), and a backslash
// becomes \\; printable ASCII and valid UTF-8 stay as they are. The result
// holds no newline, NUL or escape sequence.
std::string escape_text(std::string_view text);

// The inverse of escape_text. A backslash that starts no escape is kept as it
// is (values written before escaping was introduced read unchanged unless
// they hold one of the sequences above).
std::string unescape_text(std::string_view text);

bool is_utf8(std::string_view text);  // JSON strings must be

}  // namespace xendump
