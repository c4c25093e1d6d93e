// The service's configuration: /etc/xen-dumpd.conf, then the drop-ins
// /etc/xen-dumpd.conf.d/*.conf in lexical order (a later file overrides an
// earlier one key by key). INI syntax with one section, [Dump]. Every value is
// checked; the first bad one is refused as "FILE:LINE: message" and the caller
// keeps whatever configuration it had before.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "units.hpp"

namespace xendump::daemon {

enum class OnCrash { preserve, destroy };

struct Config {
    std::filesystem::path dump_dir;        // DumpDir=, default XENDUMP_DEFAULT_DUMP_DIR
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
    bool digests = true;                   // Digests=

    static Config defaults();
};

// The drop-in directory belonging to a main file: "FILE.d".
std::filesystem::path drop_in_dir(const std::filesystem::path& main_file);

// Applies the lines of `text` (as read from `origin`) on top of `config`.
// Throws Error("ORIGIN:LINE: ...").
void apply_config_text(Config& config, const std::string& text, const std::string& origin);

// Defaults, then `main_file` (a missing main file is fine), then its drop-ins.
// Throws Error("FILE:LINE: ...") for the first bad line.
Config load_config(const std::filesystem::path& main_file);

// Command-line options override the files.
struct ConfigOverrides {
    std::optional<std::string> host;
    std::optional<std::filesystem::path> dump_dir;
    std::optional<std::filesystem::path> control_socket;
    void apply(Config& config) const;
};

std::filesystem::path default_config_file();  // SYSCONFDIR/xen-dumpd.conf

}  // namespace xendump::daemon
