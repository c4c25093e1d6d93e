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

namespace xendump::daemon {

enum class DumpOutcome { ok, failed, refused, cancelled };
std::string to_string(DumpOutcome r);
DumpOutcome outcome_from_string(const std::string& s);  // throws Error

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

    std::string to_json() const;
    static Sidecar from_json(const std::string& text, const std::string& origin);  // throws Error
};

std::filesystem::path sidecar_path(const std::filesystem::path& dump_path);  // "<dump>.json"

// Written atomically, mode 0600 (never half a sidecar on disk).
void write_sidecar(const std::filesystem::path& path, const Sidecar& s);
Sidecar read_sidecar(const std::filesystem::path& path);

}  // namespace xendump::daemon
