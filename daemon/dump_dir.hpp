// The dump directory on disk: created 0700 (the service's own), scanned into StoredDump records
// for the retention policy, cleaned of leftover temporaries, and the place
// where new dump names are chosen (never overwriting).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config.hpp"
#include "retention.hpp"
#include "sidecar.hpp"

namespace xendump::daemon {

struct DumpEntry {
    std::filesystem::path dump;     // may not exist (refused / failed)
    std::filesystem::path sidecar;  // may not exist (dump written by another tool)
    std::optional<Sidecar> info;    // parsed sidecar
    std::string sidecar_error;      // why the sidecar could not be read
    int64_t time = 0;               // sidecar start time, else the dump's mtime
    uint64_t bytes_on_disk = 0;     // dump + sidecar + DUMP.dmesg.txt, st_blocks * 512 (a store's: object sizes)
    // A dump of a store (xen-dumpctl list --store): `dump` and `sidecar` are
    // s3:// URLs, `host` is HOST of PREFIX/HOST/NAME, and in_store says
    // whether the dump's object is there. nullopt for a dump of a directory.
    std::string host;
    std::optional<bool> in_store;
};

// The names of dumps: NAME.core, and an encrypted one's NAME.core.age (a
// compact one's NAME.kdump, NAME.kdump.age); a sidecar is the dump's name
// and ".json" (sidecar_path).
bool is_dump_name(std::string_view name);
bool is_sidecar_name(std::string_view name);

// The service's own directory (DumpDir=, or its default) is created with its
// parents when missing and kept at mode 0700 (an existing one with another
// mode is set back to 0700). A directory named on the command line
// (--dump-dir) must already exist: nothing is created or changed there, so a
// mistyped name fails instead of receiving guest memory.
void ensure_dump_dir(const std::filesystem::path& dir, DumpDirOrigin origin);
inline void ensure_dump_dir(const Config& config) { ensure_dump_dir(config.dump_dir, config.dump_dir_origin); }

// Where a consistent live dump records the log-dirty mode it turned on
// (DumpOptions::Precopy::records, xendump/logdirty_records.hpp), for the
// service's start and the next live dump to turn off after a killed
// dumper: the dump directory, beside the crash book; empty when it is not
// there (a one-shot -o FILE on a host without the service's directory).
std::filesystem::path logdirty_records_dir(const Config& config);

// Every dump ("*.core") and sidecar ("*.core.json") in `dir`, oldest first
// (a dump's "*.core.dmesg.txt" counts with it, never as a dump of its own):
// everything but the temporaries of writers (see is_leftover), hidden names
// included (older versions wrote guest names starting with '.' as they were).
std::vector<DumpEntry> scan_dump_dir(const std::filesystem::path& dir);

// Whether `name` in `dir` is a temporary of a writer (a dump or sidecar being
// written, or the room held for a sidecar) rather than a finished dump.
bool is_leftover(const std::filesystem::path& dir, const std::string& name);

std::vector<StoredDump> to_stored(const std::vector<DumpEntry>& entries,
                                  const std::filesystem::path& in_use = {});
// The same with every dump of `in_use` being written (never removed).
std::vector<StoredDump> to_stored(const std::vector<DumpEntry>& entries,
                                  const std::set<std::filesystem::path>& in_use);

FilesystemSpace filesystem_space(const std::filesystem::path& dir);

// Removes a dump, its DUMP.dmesg.txt and its sidecar. Returns the bytes
// freed. A dump still waiting for its upload (upload_state_path exists)
// loses its upload with it: the state file goes too, with a warning in the
// journal (the service aborts the multipart upload it had begun).
uint64_t remove_dump(const std::filesystem::path& id);

// The upload of a dump to object storage ([Upload], uploader.hpp) is
// recorded, until it is done, in DIR/.xen-dumpd-uploads/NAME.json.
inline constexpr const char* kUploadStateDir = ".xen-dumpd-uploads";
std::filesystem::path upload_state_path(const std::filesystem::path& dump);
// The dump this process is uploading now (empty: none): to_stored marks it
// in use, so that the storage limits never remove it mid-upload.
void set_uploading(const std::filesystem::path& dump);

// Removes the leftovers (is_leftover) of writers killed mid-dump; returns their names.
std::vector<std::string> clean_temporaries(const std::filesystem::path& dir);

// Prefix of the space a running dump holds for its sidecar (see dump_job.cpp);
// a leftover after a crash of the service is removed by clean_temporaries().
inline constexpr const char* kSidecarRoomPrefix = ".xendump-room.";

// A guest name as it appears in a dump's file name: the bytes A-Z a-z 0-9 _ +
// and '-' (but not first) and '.' (but not first) as they are, every other
// byte as %XX (upper-case hex), so that distinct names give distinct file
// names, none is hidden or taken for a temporary, and none holds '/', a
// control character or an escape sequence. Longer than kMaxEncodedName bytes,
// it is cut (never inside a %XX); the sidecar and the dump's NT_XEN_DOMAIN note
// keep the name as it is.
std::string encode_file_name_part(std::string_view name);
// `text` with each byte for which `keep(index, byte)` is false as %XX
// (upper-case hex), cut (never inside a %XX) before it passes `max` bytes.
std::string percent_encode(std::string_view text, size_t max, const std::function<bool(size_t, unsigned char)>& keep);
inline constexpr size_t kMaxEncodedName = 128;

// ENCODED-DOMID-YYYYMMDDTHHMMSSZ.core (UTC), ENCODED from encode_file_name_part
// ("domain" for an empty name); `encrypted`: .core.age.
std::string dump_file_name(const std::string& domain_name, uint32_t domid, int64_t unix_time, bool encrypted = false);
// `base_name` (NAME.core or NAME.core.age) with "-N" before its suffix (N > 0).
std::string numbered_dump_name(const std::string& base_name, unsigned n);

// dir / NAME-DOMID-YYYYMMDDTHHMMSSZ.core (or .core.age), with "-1", "-2", ... before ".core"
// when that name (or its sidecar, or its DUMP.dmesg.txt) is taken, by a file of any type, a dangling
// symbolic link included (a link is never followed nor replaced).
std::filesystem::path unique_dump_path(const std::filesystem::path& dir, const std::string& base_name);

RetentionLimits limits_of(const Config& config);

// Removes the dumps `ids` (with their sidecars), logging each with `why`.
void remove_dumps(const std::vector<std::string>& ids, const std::string& why);

// What the limits would remove now, without removing anything (the
// directory must exist). `in_use` is never chosen.
std::vector<std::string> plan_vacuum(const Config& config, const std::filesystem::path& in_use = {});

// Applies the limits now (xen-dumpctl vacuum, and after each dump); the dump
// `in_use` is never removed. Returns the paths removed.
std::vector<std::string> vacuum_dump_dir(const Config& config, const std::filesystem::path& in_use = {});

}  // namespace xendump::daemon
