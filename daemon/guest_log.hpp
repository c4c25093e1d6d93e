// The guest kernel's log in the record of every dump the service writes
// (issue 20 item 3): read from the finished dump file once the guest runs
// again (never from the guest, never delaying the dump), saved beside the
// dump as DUMP.dmesg.txt (the kdump-tools habit: the text `xen-dumpctl
// dmesg` prints), and its panic line for the sidecar and the journal.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "sidecar.hpp"

namespace xendump::daemon {

inline constexpr size_t kGuestBacktraceFrames = 16;

struct GuestLogRecord {
    GuestLog log;                      // for the sidecar
    std::optional<std::string> panic;  // the first crash report line (kernel::first_crash_line)
    std::optional<GuestBacktrace> backtrace;  // the top frames of the vcpu that reported it
    bool kernel = false;               // the dump has a Linux kernel's VMCOREINFO
};

// Reads the log of the dump `dump` through its VMCOREINFO note (the dumper
// looked for VMCOREINFO during its pass: the pages are not scanned again)
// and writes dmesg_path(dump) atomically with the dump's mode. With a crash
// report in the log, the backtrace of the vcpu that reported it (its top
// kGuestBacktraceFrames frames; kallsyms is found from VMCOREINFO's _stext,
// a short search). Never throws: whatever fails is in `log.error` (a
// partial log is saved and marked); no backtrace is no error.
GuestLogRecord record_guest_log(const std::filesystem::path& dump);

}  // namespace xendump::daemon
