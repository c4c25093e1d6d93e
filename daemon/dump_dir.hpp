// The dump directory on disk: created 0700, scanned into StoredDump records
// for the retention policy, cleaned of leftover temporaries, and the place
// where new dump names are chosen (never overwriting).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "retention.hpp"
#include "sidecar.hpp"

namespace xendump::daemon {

struct DumpEntry {
    std::filesystem::path dump;     // may not exist (refused / failed)
    std::filesystem::path sidecar;  // may not exist (dump written by another tool)
    std::optional<Sidecar> info;    // parsed sidecar
    std::string sidecar_error;      // why the sidecar could not be read
    int64_t time = 0;               // sidecar start time, else the dump's mtime
    uint64_t bytes_on_disk = 0;     // dump + sidecar, st_blocks * 512
};

// Creates the directory (and parents) with mode 0700 when missing.
void ensure_dump_dir(const std::filesystem::path& dir);

// Every dump ("*.core") and sidecar ("*.core.json") in `dir`, oldest first.
std::vector<DumpEntry> scan_dump_dir(const std::filesystem::path& dir);

std::vector<StoredDump> to_stored(const std::vector<DumpEntry>& entries,
                                  const std::filesystem::path& in_use = {});

FilesystemSpace filesystem_space(const std::filesystem::path& dir);

// Removes a dump and its sidecar. Returns the bytes freed.
uint64_t remove_dump(const std::filesystem::path& id);

// Removes ".xendump-tmp.*" leftovers of writers killed mid-dump; returns their names.
std::vector<std::string> clean_temporaries(const std::filesystem::path& dir);

// Prefix of the space a running dump holds for its sidecar (see dump_job.cpp);
// a leftover after a crash of the service is removed by clean_temporaries().
inline constexpr const char* kSidecarRoomPrefix = ".xendump-room.";

// dir / NAME-DOMID-YYYYMMDDTHHMMSSZ.core, with "-1", "-2", ... before ".core"
// when that name (or its sidecar) is taken.
std::filesystem::path unique_dump_path(const std::filesystem::path& dir, const std::string& base_name);

RetentionLimits limits_of(const struct Config& config);

// Removes the dumps `ids` (with their sidecars), logging each with `why`.
void remove_dumps(const std::vector<std::string>& ids, const std::string& why);

// Applies the limits now (xen-dumpctl vacuum, and after each dump); the dump
// `in_use` is never removed. Returns the paths removed.
std::vector<std::string> vacuum_dump_dir(const struct Config& config, const std::filesystem::path& in_use = {});

}  // namespace xendump::daemon
