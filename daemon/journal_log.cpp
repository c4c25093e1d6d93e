#include "journal_log.hpp"

#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "xendump/text.hpp"
#include "xendump_config.h"
#if XENDUMP_HAVE_SYSTEMD
#include <systemd/sd-journal.h>
#endif

namespace xendump::daemon {

namespace {

std::atomic<bool> g_force_stderr{false};
std::atomic<bool> g_enabled{true};

// systemd sets JOURNAL_STREAM=DEV:INO for the stream it connected to our
// stderr; only then is the native protocol the right place (see systemd.exec(5)).
bool stderr_is_journal() {
    const char* js = std::getenv("JOURNAL_STREAM");
    if (!js) return false;
    unsigned long long dev = 0, ino = 0;
    if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
    struct stat st {};
    if (::fstat(STDERR_FILENO, &st) != 0) return false;
    return st.st_dev == dev && st.st_ino == ino;
}

const char* level_word(LogLevel level) {
    switch (level) {
        case LogLevel::error: return "error: ";
        case LogLevel::warning: return "warning: ";
        default: return "";
    }
}

}  // namespace

void log_to_stderr_only(bool yes) { g_force_stderr = yes; }
void log_set_enabled(bool yes) { g_enabled = yes; }

std::vector<std::string> journal_items(LogLevel level, const std::string& message, const LogFields& fields,
                                       const char* message_id) {
    std::vector<std::string> items;
    items.push_back("MESSAGE=" + escape_text(message));
    items.push_back("PRIORITY=" + std::to_string(static_cast<int>(level)));
    items.push_back("SYSLOG_IDENTIFIER=xen-dumpd");
    if (message_id) items.push_back(std::string("MESSAGE_ID=") + message_id);
    for (const auto& [k, v] : fields) items.push_back(k + "=" + v);
    return items;
}

std::string stderr_line(LogLevel level, const std::string& message) {
    return "xen-dumpd: " + std::string(level_word(level)) + escape_text(message) + "\n";
}

void log_message(LogLevel level, const std::string& message, const LogFields& fields, const char* message_id) {
    if (!g_enabled) return;
#if XENDUMP_HAVE_SYSTEMD
    static const bool journal = stderr_is_journal();
    if (journal && !g_force_stderr) {
        std::vector<std::string> items = journal_items(level, message, fields, message_id);
        std::vector<struct iovec> iov;
        for (auto& s : items) iov.push_back({s.data(), s.size()});
        if (sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) >= 0) return;
    }
#endif
    static std::mutex mutex;
    std::lock_guard lock(mutex);
    std::string line = stderr_line(level, message);
    (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace xendump::daemon
