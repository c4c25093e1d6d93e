#include "sd_notify.hpp"

#include "xendump_config.h"
#if XENDUMP_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace xendump::daemon {

namespace {
void send(const std::string& text) {
#if XENDUMP_HAVE_SYSTEMD
    sd_notify(0, text.c_str());
#else
    (void)text;
#endif
}
}  // namespace

void notify_ready() { send("READY=1\nSTATUS=Waiting for crashes and requests"); }
void notify_status(const std::string& status) { send("STATUS=" + status); }
void notify_stopping() { send("STOPPING=1\nSTATUS=Stopping"); }
void notify_watchdog() { send("WATCHDOG=1"); }

std::optional<std::chrono::milliseconds> watchdog_interval() {
#if XENDUMP_HAVE_SYSTEMD
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
        return std::chrono::milliseconds(std::max<uint64_t>(usec / 4000, 1));
#endif
    return std::nullopt;
}

}  // namespace xendump::daemon
