// RAII owners of the three libxen handles, and a xentoollog logger that keeps
// libxenctrl quiet: it remembers the last message instead of printing it, so
// the caller can fold it into one Error line (the library itself would write
// several lines to stderr when there is no hypervisor).
#pragma once

#include <cstdarg>
#include <memory>
#include <mutex>
#include <string>

// Xen's C headers have no extern "C" guards of their own.
extern "C" {
#include <xenctrl.h>
#include <xenforeignmemory.h>
#include <xenstore.h>
#include <xentoollog.h>
}

namespace xendump::xen {

// Must stay the first member: libxen calls us back with a pointer to `base`.
// libxen may log from any thread that calls it (the pass's reader maps while
// the main thread unmaps): the message is kept under a lock.
struct QuietLogger {
    xentoollog_logger base;

    QuietLogger();
    void remember(std::string message);
    std::string last_message() const;
    QuietLogger(const QuietLogger&) = delete;
    QuietLogger& operator=(const QuietLogger&) = delete;

    // Public as `base` is (one access level keeps the struct standard-layout,
    // which the cast from `base` needs); used through the two methods only.
    mutable std::mutex mutex_;
    std::string last_message_;
};

struct XcCloser {
    void operator()(xc_interface* xch) const noexcept { xc_interface_close(xch); }
};
struct ForeignMemoryCloser {
    void operator()(xenforeignmemory_handle* fmem) const noexcept { xenforeignmemory_close(fmem); }
};
struct XenstoreCloser {
    void operator()(xs_handle* xsh) const noexcept { xs_close(xsh); }
};

using XcHandle = std::unique_ptr<xc_interface, XcCloser>;
using ForeignMemoryHandle = std::unique_ptr<xenforeignmemory_handle, ForeignMemoryCloser>;
using XenstoreHandle = std::unique_ptr<xs_handle, XenstoreCloser>;

// Memory that libxenstore returns with malloc().
struct FreeDeleter {
    void operator()(void* p) const noexcept;
};
template <typename T>
using MallocPtr = std::unique_ptr<T, FreeDeleter>;

}  // namespace xendump::xen
