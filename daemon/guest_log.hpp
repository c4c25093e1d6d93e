// The guest kernel's log in the record of every dump the service writes
// (issue 20 item 3): saved beside the dump as DUMP.dmesg.txt (the
// kdump-tools habit: the text `xen-dumpctl dmesg` prints), and its panic
// line and the crashed vcpu's backtrace for the sidecar and the journal.
//
// A plain dump's log is read from the finished file once the guest runs
// again (never from the guest, never delaying the dump). An encrypted
// dump's cannot be: the service holds no private key (issue 33). Its log is
// read from the paused guest as the dump holds it, once the pages are
// written and before the guest runs again (DumpOptions::inspect_guest), and
// saved encrypted to the dump's recipients as NAME.dmesg.txt.age (the age
// file of the text NAME.dmesg.txt would hold: dmesg_path), never in clear;
// its panic line and backtrace reach the sidecar and the journal only as
// ClearMetadata= allows (xen-dumpd.conf(5)).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sidecar.hpp"
#include "xendump/dump_kernel_log.hpp"

namespace xendump::daemon {

inline constexpr size_t kGuestBacktraceFrames = 16;
// The most of a panic line (escaped, as dmesg prints it) the records keep:
// a guest's line may be 64 KiB, four times that escaped, and it goes into
// the sidecar, the journal and the crash signature.
inline constexpr size_t kPanicLineBytes = 1024;

// `line` cut to at most kPanicLineBytes, before an escape or a UTF-8
// character it would split, and marked " [N more bytes]"; as it is when it
// fits.
std::string bounded_panic_line(std::string line);

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

// An encrypted dump's log, read from the paused guest (`info`: the
// VMCOREINFO the dumper found, null: none) with its text, to be saved by
// save_encrypted_guest_log once the dump is written. Never throws (as
// record_guest_log); the text is held in memory only.
struct GuestLogCapture {
    GuestLogRecord record;
    std::optional<std::string> text;  // what DUMP.dmesg.txt would hold
};
GuestLogCapture capture_guest_log(const GuestView& guest, const kernel::Vmcoreinfo* info);

// Writes the captured text as dmesg_path(dump) (NAME.dmesg.txt.age),
// encrypted to `recipients`, atomically with the dump's mode; records the
// file's name, or why it was not written, in capture.record.log.
void save_encrypted_guest_log(const std::filesystem::path& dump, GuestLogCapture& capture,
                              const std::vector<std::string>& recipients);

}  // namespace xendump::daemon
