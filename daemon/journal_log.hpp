// Logging: to the journal with structured fields (DOMID=, DOMAIN=,
// DUMP_PATH=, ...) and fixed MESSAGE_IDs when stderr is connected to journald
// ($JOURNAL_STREAM names it), else one line per message on stderr.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace xendump::daemon {

// Fixed MESSAGE_IDs (generated once, never change): `journalctl
// MESSAGE_ID=...` finds every dump the service wrote or failed to write.
inline constexpr const char* kMessageDumpWritten = "a87f8b9b9bce4231b361f9bcb5a18f16";
inline constexpr const char* kMessageDumpFailed = "0ee07b10994b4463a8ee1afc6a0167b5";

enum class LogLevel { error = 3, warning = 4, notice = 5, info = 6, debug = 7 };

using LogFields = std::vector<std::pair<std::string, std::string>>;

// Thread-safe. `fields` are extra journal fields (NAME=value, names in upper
// case), sent as they are (the journal keeps any bytes; DOMAIN= is the guest's
// name exactly). The message text, on the journal and on stderr, has its
// control characters escaped (escape_text): a guest name cannot forge a
// line or send an escape sequence to whoever reads the log.
void log_message(LogLevel level, const std::string& message, const LogFields& fields = {},
                 const char* message_id = nullptr);

// What log_message sends: the journal entry's fields, or the stderr line.
std::vector<std::string> journal_items(LogLevel level, const std::string& message, const LogFields& fields,
                                       const char* message_id);
std::string stderr_line(LogLevel level, const std::string& message);

// One-shot commands report for themselves: silence the service's log lines.
void log_set_enabled(bool yes);

// Forces stderr output (tests) or lets $JOURNAL_STREAM decide (default).
void log_to_stderr_only(bool yes);

}  // namespace xendump::daemon
