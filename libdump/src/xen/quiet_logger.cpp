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
    self->last_message = buf;
    // One line: the caller puts this inside its own message.
    for (char& c : self->last_message)
        if (c == '\n') c = ' ';
    if (errnoval > 0) {
        self->last_message += ": ";
        self->last_message += std::strerror(errnoval);
    }
}

void ignore_progress(xentoollog_logger*, const char*, const char*, int, unsigned long,
                     unsigned long) {}

// The logger is owned by the backend object, never by libxen.
void ignore_destroy(xentoollog_logger*) {}

}  // namespace

QuietLogger::QuietLogger() : base{remember_message, ignore_progress, ignore_destroy} {}

void FreeDeleter::operator()(void* p) const noexcept { std::free(p); }

}  // namespace xendump::xen
