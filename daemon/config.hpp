// The service's configuration: /etc/xen-dumpd.conf, then the drop-ins
// /etc/xen-dumpd.conf.d/*.conf in lexical order (a later file overrides an
// earlier one key by key). INI syntax: the [Dump] section, and [Domain NAME]
// sections holding Format=, Compress=, DumpLevel=, Recipient=,
// RecipientsFile= and ClearMetadata= for the guest named NAME (any file may hold them). Every value is checked; the first bad one is
// refused as "FILE:LINE: message" and the caller keeps whatever
// configuration it had before.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "units.hpp"
#include "xendump/kdump.hpp"

namespace xendump::daemon {

enum class OnCrash { preserve, destroy };

// Live=: how the service dumps a running guest on request when the request
// does not say (xen-dumpd --domain N without --live): paused for the whole
// copy, a consistent pre-copy, or copied running. Crash dumps are of a
// stopped guest and never live.
enum class LiveDefault { no, consistent, inconsistent };

// Where the dump directory was named: the service's own (DumpDir= or the
// default) may be created and is kept at mode 0700; one named on the command
// line (--dump-dir of a one-shot dump or of xen-dumpctl) must exist and is
// used as it is. (The service itself treats its --dump-dir as its own.)
enum class DumpDirOrigin { configured, command_line };

// How a dump is written: Format=, Compress=, DumpLevel= (xen-dumpd --format,
// --compress, --dump-level).
struct DumpFormat {
    bool kdump = false;  // Format=kdump: a compact file
    Compression compression = Compression::zstd;
    unsigned dump_level = 0;  // 0-31, kdump only
    bool operator==(const DumpFormat&) const = default;
};

// What an encrypted dump's sidecar and journal entry keep in clear of what
// was read from the guest (ClearMetadata=, xen-dumpd.conf(5)): beyond the
// default (domain, times, sizes, format, result, encrypted, recipients and
// the log's record count), the panic line and the backtrace's function
// names only when listed. A plain dump's record is all in clear anyway.
struct ClearMetadata {
    bool panic = false;      // ClearMetadata=panic: guest_panic, GUEST_PANIC=
    bool backtrace = false;  // ClearMetadata=backtrace: guest_backtrace, GUEST_BACKTRACE=
    bool operator==(const ClearMetadata&) const = default;
};

// The Format=, Compress= and DumpLevel= lines of one section ([Dump] or a
// [Domain NAME]); unset: the [Dump] section's, else the default. Each with
// the "FILE:LINE" that set it, for errors found once every file is read.
struct DumpFormatKeys {
    std::optional<bool> kdump;
    std::optional<Compression> compression;
    std::optional<unsigned> dump_level;
    std::string kdump_origin, dump_level_origin;
    // Recipient= and RecipientsFile= (xendump/recipients.hpp, canonical
    // form): set, the section's list (a [Domain NAME]'s replaces [Dump]'s;
    // an empty value empties it); unset, [Dump]'s, else none (plaintext).
    std::optional<std::vector<std::string>> recipients;
    // ClearMetadata= (an encrypted dump's): set, the section's; unset, [Dump]'s.
    std::optional<ClearMetadata> clear_metadata;
};

// [Upload]: where the service copies each dump it published (issue 34).
// Target= unset: nothing is uploaded.
// Mode=spool: each dump is written to the dump directory, then uploaded
// (uploader.hpp). Mode=stream: written straight into the store, nothing
// local, falling back to spool when the store cannot take it
// (DumpJobHooks::stream).
enum class UploadMode { spool, stream };
struct UploadConfig {
    std::string bucket;        // Target=s3://BUCKET/PREFIX; empty: no upload
    std::string prefix;        // PREFIX without a trailing '/' ("" for the bucket's top)
    std::string endpoint;      // Endpoint=, "": AWS_ENDPOINT_URL, the profile's, else AWS's
    std::string region;        // Region=, "": AWS_REGION, ..., us-east-1
    UploadMode mode = UploadMode::spool;  // Mode=spool|stream
    bool keep_local = false;   // KeepLocal= (Mode=spool only: check_config refuses it with Mode=stream)
    uint64_t part_size = uint64_t{16} << 20;  // PartSize=, 5M to 5G
    unsigned in_flight = 3;                   // PartsInFlight=, 1 to 16
    bool enabled() const { return !bucket.empty(); }
    std::string target() const;  // s3://BUCKET/PREFIX as configured
    bool operator==(const UploadConfig&) const = default;
};

// One KEY=VALUE line as it was applied, for `xen-dumpctl config`: which
// file and line set each value.
struct ConfigLine {
    std::string section;  // "Dump", "Upload" or "Domain NAME"
    std::string key, value;
    std::string origin;  // FILE:LINE
};

// A key of the configuration with its default, as `xen-dumpctl config`
// shows an unset key: the value the service then uses, and what it means
// when the text alone does not say.
struct KeyDefault {
    std::string key;
    std::string value;
    std::string meaning;  // "" or e.g. "no limit"
    bool per_domain = false;  // a [Domain NAME] section may hold it too
    std::string section = "Dump";  // the section it belongs in: "Dump" or "Upload"
};
// Every key, in the order of xen-dumpd.conf(5): [Dump]'s, then [Upload]'s.
const std::vector<KeyDefault>& key_defaults();
// Whether `key` is a key apply_config_text takes (for the test that
// key_defaults() names them all).
bool is_config_key(std::string_view key);

struct Config {
    std::filesystem::path dump_dir;        // DumpDir=, default XENDUMP_DEFAULT_DUMP_DIR
    DumpDirOrigin dump_dir_origin = DumpDirOrigin::configured;
    std::string host;                      // Host=, empty: $XEN_DUMP_HOST or "xen"
    std::filesystem::path control_socket;  // ControlSocket=, default XENDUMP_DEFAULT_CONTROL_SOCKET
    std::string control_group;             // ControlGroup=, empty: root only
    OnCrash on_crash = OnCrash::preserve;  // OnCrash=preserve|destroy
    unsigned max_parallel = 1;             // MaxParallel= 1..64
    std::optional<SizeLimit> max_use;      // MaxUse=, unset: no limit
    std::optional<SizeLimit> keep_free;    // KeepFree=, default 5%
    unsigned keep_per_domain = 0;          // KeepPerDomain=, 0: no limit
    std::chrono::seconds max_age{0};       // MaxAge=, 0: no limit
    std::chrono::seconds min_interval{0};  // MinInterval=, per domain, crash dumps only
    LiveDefault live = LiveDefault::no;    // Live=no|consistent|inconsistent, requests only
    std::chrono::milliseconds max_pause{100};  // MaxPause= 1..60000 ms, with Live=consistent
    unsigned live_rounds = 5;              // LiveRounds= 0..100, with Live=consistent
    bool digests = true;                   // Digests=
    unsigned threads = 0;                  // Threads= 1..kMaxWriteThreads, 0 (empty): write_threads()'s default
    DumpFormatKeys dump_format;            // Format=, Compress=, DumpLevel= of [Dump]
    std::map<std::string, DumpFormatKeys, std::less<>> domain_formats;  // of [Domain NAME], by NAME
    UploadConfig upload;                   // [Upload]
    std::vector<std::string> files;   // the files read, in order (the main file, then the drop-ins)
    std::vector<ConfigLine> lines;    // every KEY=VALUE applied, in order

    static Config defaults();
    // The threads of each dump: Threads=, else the cores (cli::default_threads).
    unsigned write_threads() const;
    // How the dumps of the guest named `domain_name` are written: its
    // [Domain] section's keys, else [Dump]'s, else v1.
    DumpFormat format_for(std::string_view domain_name) const;
    // Whom the dumps of the guest named `domain_name` are encrypted to: its
    // [Domain] section's Recipient=/RecipientsFile=, else [Dump]'s; empty:
    // not encrypted.
    std::vector<std::string> recipients_for(std::string_view domain_name) const;
    // What an encrypted dump of that guest keeps in clear: its [Domain]
    // section's ClearMetadata=, else [Dump]'s; else none of it.
    ClearMetadata clear_metadata_for(std::string_view domain_name) const;
};

// The drop-in directory belonging to a main file: "FILE.d".
std::filesystem::path drop_in_dir(const std::filesystem::path& main_file);

// Applies the lines of `text` (as read from `origin`) on top of `config`.
// Throws Error("ORIGIN:LINE: ..."). Does not check how the files combine:
// check_config does, once every file is applied.
void apply_config_text(Config& config, const std::string& text, const std::string& origin);

// The checks that need every file: a DumpLevel= above 0 where Format= is
// v1, for [Dump] and every [Domain]. Throws Error("FILE:LINE: ...") naming
// the DumpLevel= line (and the Format= line that makes it v1). And
// KeepLocal=yes with Mode=stream (a streamed dump has no local copy to
// keep), naming both lines.
void check_config(const Config& config);

// What a missing main file means: the defaults (only for the default path,
// which need not exist), or an error (a file named with --config).
enum class MissingConfig { defaults, error };

// Defaults, then `main_file`, then its drop-ins. Throws Error("FILE:LINE:
// ...") for the first bad line, and Error naming the file when it (or a
// drop-in) is not a regular file or cannot be read, or is missing and
// `missing` is MissingConfig::error.
Config load_config(const std::filesystem::path& main_file, MissingConfig missing);
// The same, with MissingConfig::defaults for default_config_file() and
// MissingConfig::error for any other path.
Config load_config(const std::filesystem::path& main_file);

// Command-line options override the files.
struct ConfigOverrides {
    std::optional<std::string> host;
    std::optional<std::filesystem::path> dump_dir;  // DumpDirOrigin::command_line
    std::optional<std::filesystem::path> control_socket;
    std::optional<unsigned> threads;  // --threads
    void apply(Config& config) const;
};

std::filesystem::path default_config_file();  // SYSCONFDIR/xen-dumpd.conf

}  // namespace xendump::daemon
