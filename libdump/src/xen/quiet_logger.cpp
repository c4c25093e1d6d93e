#include "xen/xen_handles.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace xendump::xen {

namespace {

// Keeps the last message of level WARN or above (those explain a failure);
// everything else (debug chatter, progress) is dropped.
void remember_message(xentoollog_logger* logger, xentoollog_level level, int errnoval,
                      const char* /*context*/, const char* format, va_list args) {
    auto* self = reinterpret_cast<QuietLogger*>(logger);
    if (level < XTL_WARN) return;
    char buf[512];
    std::vsnprintf(buf, sizeof buf, format, args);
    std::string message = buf;
    // One line: the caller puts this inside its own message.
    for (char& c : message)
        if (c == '\n') c = ' ';
    if (errnoval > 0) {
        char text[256];
        message += ": ";
        message += strerror_r(errnoval, text, sizeof text);  // GNU: returns the text
    }
    self->remember(std::move(message));
}

void ignore_progress(xentoollog_logger*, const char*, const char*, int, unsigned long,
                     unsigned long) {}

// The logger is owned by the backend object, never by libxen.
void ignore_destroy(xentoollog_logger*) {}

}  // namespace

QuietLogger::QuietLogger() : base{remember_message, ignore_progress, ignore_destroy} {}

void QuietLogger::remember(std::string message) {
    std::lock_guard lock(mutex_);
    last_message_ = std::move(message);
}

std::string QuietLogger::last_message() const {
    std::lock_guard lock(mutex_);
    return last_message_;
}

void FreeDeleter::operator()(void* p) const noexcept { std::free(p); }

}  // namespace xendump::xen
