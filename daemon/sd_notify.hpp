// sd-daemon notifications (sd_notify(3)): READY=1 once setup succeeded,
// STATUS= for the current work, WATCHDOG=1 at a quarter of WatchdogSec
// ($WATCHDOG_USEC), STOPPING=1 on every exit. No-ops without $NOTIFY_SOCKET
// or when built without libsystemd.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace xendump::daemon {

void notify_ready();
void notify_status(const std::string& status);
void notify_stopping();
void notify_watchdog();
// The interval at which WATCHDOG=1 must be sent (a quarter of WatchdogSec),
// or nullopt when the watchdog is off.
std::optional<std::chrono::milliseconds> watchdog_interval();

}  // namespace xendump::daemon
