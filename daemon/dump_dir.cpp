#include "dump_dir.hpp"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "config.hpp"
#include "journal_log.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::daemon {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kDumpSuffix = ".core";
// An encrypted dump (xen-dump-core(5), "Encrypted dumps"): the age file of a .core.
constexpr std::string_view kEncryptedDumpSuffix = ".core.age";

std::mutex g_uploading_mutex;
fs::path g_uploading;

bool is_uploading(const fs::path& dump) {
    std::lock_guard lock(g_uploading_mutex);
    return !g_uploading.empty() && g_uploading == dump;
}

uint64_t disk_bytes(const fs::path& p, int64_t* mtime = nullptr) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return 0;
    if (mtime) *mtime = st.st_mtim.tv_sec;
    return static_cast<uint64_t>(st.st_blocks) * 512;
}

}  // namespace

fs::path logdirty_records_dir(const Config& config) {
    std::error_code ec;
    return fs::is_directory(config.dump_dir, ec) ? config.dump_dir : fs::path();
}

void ensure_dump_dir(const fs::path& dir, DumpDirOrigin origin) {
    struct stat st {};
    bool exists = ::stat(dir.c_str(), &st) == 0;
    if (!exists && errno != ENOENT) throw_errno("cannot use dump directory", dir.string());
    if (exists && !S_ISDIR(st.st_mode)) throw Error("dump directory is not a directory", dir.string());
    if (origin == DumpDirOrigin::command_line) {
        if (!exists)
            throw Error("no such dump directory (a directory given with --dump-dir must exist; only the configured "
                        "DumpDir= is created)",
                        dir.string());
        return;
    }
    if (exists) {
        if ((st.st_mode & 07777) == 0700) return;
        if (::chmod(dir.c_str(), 0700) != 0) throw_errno("cannot set mode 0700 of dump directory", dir.string());
        char was[8];
        std::snprintf(was, sizeof was, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        log_message(LogLevel::notice, "dump directory " + dir.string() + " had mode " + was + "; set to 0700",
                    {{"DUMP_DIR", dir.string()}});
        return;
    }
    std::error_code ec;
    fs::create_directories(dir.parent_path(), ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw_errno("cannot create dump directory", dir.string());
    // mkdir obeys the umask; say exactly what we mean.
    if (::chmod(dir.c_str(), 0700) != 0) throw_errno("cannot set mode of dump directory", dir.string());
}

bool is_leftover(const fs::path& dir, const std::string& name) {
    // AtomicFile's temporaries are NAME.XXXXXX (mkstemp letters and digits
    // after the last '.'), so a finished dump or sidecar never ends like one,
    // even when an older version named it after a guest called ".xendump-tmp.".
    if (name.starts_with(AtomicFile::kTempPrefix))
        return !is_dump_name(name) && !is_sidecar_name(name);
    // The room held for a sidecar has the dump's name and never a sidecar of its own.
    if (name.starts_with(kSidecarRoomPrefix)) {
        std::error_code ec;
        return is_dump_name(name) &&
               fs::symlink_status(sidecar_path(dir / name), ec).type() == fs::file_type::not_found;
    }
    return false;
}

constexpr std::string_view kDumpSuffixes[] = {".core", ".core.age", ".kdump", ".kdump.age"};
bool is_dump_name(std::string_view name) {
    for (auto s : kDumpSuffixes)
        if (name.ends_with(s)) return true;
    return false;
}
bool is_sidecar_name(std::string_view name) {
    return name.ends_with(".json") && is_dump_name(name.substr(0, name.size() - 5));
}

std::vector<DumpEntry> scan_dump_dir(const fs::path& dir) {
    std::vector<DumpEntry> entries;
    std::error_code ec;
    fs::directory_iterator it(dir, ec);
    if (ec) throw Error("cannot read dump directory: " + ec.message(), dir.string());
    std::vector<fs::path> names;
    for (const auto& e : it) names.push_back(e.path());
    std::sort(names.begin(), names.end());
    for (const auto& p : names) {
        std::string n = p.filename().string();
        if (is_leftover(dir, n)) continue;
        DumpEntry entry;
        if (is_sidecar_name(n)) {
            entry.sidecar = p;
            entry.dump = p.string().substr(0, p.string().size() - 5);
        } else if (is_dump_name(n)) {
            entry.dump = p;
            entry.sidecar = sidecar_path(p);
            // Counted once, through its sidecar, when it has one.
            if (std::binary_search(names.begin(), names.end(), entry.sidecar)) continue;
        } else {
            continue;
        }
        int64_t mtime = 0;
        entry.bytes_on_disk = disk_bytes(entry.dump, &mtime);
        int64_t sidecar_mtime = 0;
        entry.bytes_on_disk += disk_bytes(entry.sidecar, &sidecar_mtime);
        entry.bytes_on_disk += disk_bytes(dmesg_path(entry.dump));
        entry.time = mtime ? mtime : sidecar_mtime;
        if (fs::exists(entry.sidecar, ec)) {
            try {
                entry.info = read_sidecar(entry.sidecar);
                if (entry.info->start_time) entry.time = entry.info->start_time;
            } catch (const Error& e) {
                entry.sidecar_error = e.what();
            }
        }
        entries.push_back(std::move(entry));
    }
    std::stable_sort(entries.begin(), entries.end(),
                     [](const DumpEntry& a, const DumpEntry& b) { return a.time < b.time; });
    return entries;
}

std::vector<StoredDump> to_stored(const std::vector<DumpEntry>& entries, const fs::path& in_use) {
    return to_stored(entries, in_use.empty() ? std::set<fs::path>{} : std::set<fs::path>{in_use});
}

std::vector<StoredDump> to_stored(const std::vector<DumpEntry>& entries, const std::set<fs::path>& in_use) {
    std::vector<StoredDump> out;
    for (const auto& e : entries) {
        StoredDump s;
        s.id = e.dump.string();
        if (e.info) s.domain = !e.info->uuid.empty() ? e.info->uuid : e.info->domain_name;
        else s.domain = e.dump.filename().string();
        s.time = e.time;
        s.bytes = e.bytes_on_disk;
        s.in_use = in_use.count(e.dump) != 0 || is_uploading(e.dump);
        s.crash = e.info && e.info->reason == "crash" && e.info->result == DumpOutcome::ok;
        out.push_back(std::move(s));
    }
    return out;
}

FilesystemSpace filesystem_space(const fs::path& dir) {
    struct statvfs sv {};
    if (::statvfs(dir.c_str(), &sv) != 0) throw_errno("cannot statvfs", dir.string());
    return FilesystemSpace{static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize,
                           static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize};
}

uint64_t remove_dump(const fs::path& id) {
    uint64_t freed = 0;
    std::error_code ec;
    // The dump, then the files of its record: never a record without its dump.
    for (const fs::path& p : {id, dmesg_path(id), sidecar_path(id)}) {
        freed += disk_bytes(p);
        fs::remove(p, ec);
    }
    if (fs::remove(upload_state_path(id), ec))
        log_message(LogLevel::warning,
                    "the upload of " + id.string() + " to object storage is dropped: the dump was removed before it "
                                                      "was uploaded",
                    {{"DUMP_PATH", id.string()}});
    return freed;
}

fs::path upload_state_path(const fs::path& dump) {
    return dump.parent_path() / kUploadStateDir / (dump.filename().string() + ".json");
}

void set_uploading(const fs::path& dump) {
    std::lock_guard lock(g_uploading_mutex);
    g_uploading = dump;
}

std::vector<std::string> clean_temporaries(const fs::path& dir) {
    std::vector<std::string> removed;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        std::string n = e.path().filename().string();
        if (is_leftover(dir, n) && fs::remove(e.path(), ec)) removed.push_back(n);
    }
    return removed;
}

std::string percent_encode(std::string_view text, size_t max, const std::function<bool(size_t, unsigned char)>& keep) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        const bool as_is = keep(i, c);
        if (out.size() + (as_is ? 1 : 3) > max) break;
        if (as_is) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

std::string encode_file_name_part(std::string_view name) {
    return percent_encode(name, kMaxEncodedName, [](size_t i, unsigned char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '+' ||
               ((c == '-' || c == '.') && i > 0);
    });
}

std::string dump_file_name(const std::string& domain_name, uint32_t domid, int64_t unix_time, bool encrypted) {
    const std::string stamp = util::utc_time(static_cast<std::time_t>(unix_time), "%Y%m%dT%H%M%SZ");
    std::string part = domain_name.empty() ? std::string("domain") : encode_file_name_part(domain_name);
    return part + "-" + std::to_string(domid) + "-" + stamp + std::string(encrypted ? kEncryptedDumpSuffix : kDumpSuffix);
}

std::string numbered_dump_name(const std::string& base_name, unsigned n) {
    const std::string_view suffix = base_name.ends_with(kEncryptedDumpSuffix) ? kEncryptedDumpSuffix : kDumpSuffix;
    std::string stem = base_name;
    if (stem.ends_with(suffix)) stem.erase(stem.size() - suffix.size());
    return (n == 0 ? stem : stem + "-" + std::to_string(n)) + std::string(suffix);
}

fs::path unique_dump_path(const fs::path& dir, const std::string& base_name) {
    // lstat, not stat: a dangling symbolic link is a taken name.
    auto taken = [](const fs::path& p) {
        std::error_code ec;
        return fs::symlink_status(p, ec).type() != fs::file_type::not_found;
    };
    for (unsigned n = 0; n < 100000; ++n) {
        fs::path p = dir / numbered_dump_name(base_name, n);
        if (!taken(p) && !taken(sidecar_path(p)) && !taken(dmesg_path(p))) return p;
    }
    throw Error("no free dump name", (dir / base_name).string());
}

RetentionLimits limits_of(const Config& config) {
    return RetentionLimits{config.max_use, config.keep_free, config.keep_per_domain, config.max_age};
}

void remove_dumps(const std::vector<std::string>& ids, const std::string& why) {
    for (const auto& id : ids) {
        remove_dump(id);
        log_message(LogLevel::info, "removed " + id + " (" + why + ")", {{"DUMP_PATH", id}});
    }
}

std::vector<std::string> plan_vacuum(const Config& config, const fs::path& in_use) {
    int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    // scan_dump_dir first: it names a missing directory, statvfs would not say which.
    auto stored = to_stored(scan_dump_dir(config.dump_dir), in_use);
    return decide_retention(stored, limits_of(config), filesystem_space(config.dump_dir), now, 0).remove;
}

std::vector<std::string> vacuum_dump_dir(const Config& config, const fs::path& in_use) {
    auto remove = plan_vacuum(config, in_use);
    remove_dumps(remove, "storage limits");
    return remove;
}

}  // namespace xendump::daemon
