// The JSON sidecar "<dump>.json" written beside every dump (and for every
// dump that was refused or failed, where no dump file exists): what was
// dumped, why, when, how big, and whether it worked. `xen-dumpctl list` and
// the retention policy read these.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xendump::daemon {

enum class DumpOutcome { ok, failed, refused, cancelled };
std::string to_string(DumpOutcome r);
DumpOutcome outcome_from_string(const std::string& s);  // throws Error

// What the service found of the guest kernel's log in a dump it wrote
// (guest_log.hpp): read from the finished file, saved beside it.
struct GuestLog {
    std::optional<uint64_t> records;  // records read; absent when the log could not be read
    bool partial = false;             // some of the buffer was damaged or missing
    std::vector<std::string> damage;  // why, one sentence each
    std::string dmesg_file;           // file name of DUMP.dmesg.txt, or its .age ("" when none was written)
    std::string error;                // why the log could not be read or saved ("" when it was)
};

// The top frames of the crashed vcpu's backtrace (kernel/backtrace.hpp),
// found in a dump the service wrote (guest_log.hpp).
struct GuestBacktrace {
    uint32_t vcpu = 0;
    std::string method;               // orc, frame-pointer, stack-scan
    std::vector<std::string> frames;  // "name+0xoff" innermost first ("? " before an unreliable one)
    std::string stopped;              // why the walk ended early ("" when it did not)
};

struct Sidecar {
    std::string domain_name;  // exactly as the hypervisor has it (JSON "domain", or "domain_bytes" in hex)
    uint32_t domid = 0;
    std::string uuid;
    std::string type;     // pv, hvm, pvh
    std::string reason;   // crash, request, watchdog
    int64_t start_time = 0;  // unix seconds (UTC)
    int64_t end_time = 0;
    uint64_t pages = 0;
    uint64_t file_size = 0;      // logical size of the dump
    uint64_t bytes_on_disk = 0;  // st_blocks * 512 of the dump
    std::string digests;         // "written", "none"
    DumpOutcome result = DumpOutcome::ok;
    std::string error;           // empty when ok
    std::string dump_file;       // file name of the dump (beside the sidecar)
    std::string format = "v1";   // "v1" or "kdump" (sidecars of older versions: v1)
    // A compact file's: the page compression and the dump level (applied,
    // once the dump is written; as asked, in a failed dump's record).
    std::optional<std::string> compression;
    std::optional<unsigned> dump_level;
    // A written compact file's zero pages: those of `pages` (its second
    // bitmap, zero pages included) stored as its one shared zero page
    // (DumpReader::zero_pages). Absent for v1 files and in failed dumps.
    std::optional<uint64_t> zero_pages;
    // An encrypted dump (WriteOptions::recipients): to how many recipients
    // (0: not encrypted; the sidecar then has no "encrypted" key). Nothing
    // read from the guest's memory is kept in clear for it unless
    // ClearMetadata= allows it: guest_log counts records and names the
    // encrypted NAME.dmesg.txt.age; guest_panic and guest_backtrace are set
    // only as ClearMetadata= says (guest_log.hpp).
    unsigned recipients = 0;
    // A live dump (xen-dumpd --live): "precopy" (consistent) or
    // "inconsistent"; absent for a paused dump. A pre-copy's pause (µs),
    // rounds and pages copied again (written dumps only), and its restarts
    // (the guest's layout changed; absent when none, as LIVE_RESTARTS=).
    std::optional<std::string> live;
    std::optional<uint64_t> pause_usec;
    std::optional<unsigned> live_rounds;
    std::optional<uint64_t> pages_recopied;
    std::optional<unsigned> live_restarts;
    // Written dumps only (absent in failed ones and sidecars of older versions):
    std::optional<GuestLog> guest_log;
    std::optional<std::string> guest_panic;  // the log's first crash report line, as dmesg prints it
    std::optional<GuestBacktrace> guest_backtrace;  // the vcpu that reported it (with a crash report only)


    std::string to_json() const;
    static Sidecar from_json(const std::string& text, const std::string& origin);  // throws Error
};

std::filesystem::path sidecar_path(const std::filesystem::path& dump_path);  // "<dump>.json"
// "<dump>.dmesg.txt"; for an encrypted dump "NAME.core.age", the age file of
// what NAME.core.dmesg.txt would hold: "NAME.core.dmesg.txt.age".
std::filesystem::path dmesg_path(const std::filesystem::path& dump_path);

// Writes `text` to `path` atomically (AtomicFile: temporary + rename, never
// replacing) with `mode`. Throws Error naming the file.
void write_file_atomically(const std::filesystem::path& path, std::string_view text, unsigned mode);

// Writes `text` to `path`, replacing the file there: PATH.new is written
// atomically (AtomicFile), then renamed over `path`. Throws Error naming it.
void replace_file_atomically(const std::filesystem::path& path, std::string_view text, unsigned mode);

// Written atomically, mode 0600 (never half a sidecar on disk).
void write_sidecar(const std::filesystem::path& path, const Sidecar& s);

// A guest_panic line without the "[seconds.micros] " time dmesg prints
// before it (the line as it is when it has none).
std::string_view without_log_time(std::string_view panic);
Sidecar read_sidecar(const std::filesystem::path& path);

}  // namespace xendump::daemon
