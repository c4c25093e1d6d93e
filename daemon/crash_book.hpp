// Exactly-once bookkeeping of crashes, kept across restarts of the service.
//
// Xen has no crash counter: a crashed domain (on_crash="preserve") simply
// stays shut down with reason crash until it is destroyed or restarted, and a
// restarted domain gets a new domid (domids are not reused until they wrap).
// So a crash instance is "domain DOMID with UUID, seen crashed", and it ends
// when that domid is seen running again, with another uuid, or gone. Handled
// instances are stored in a small JSON state file, written atomically after
// each dump finishes (not when it starts: a service killed mid-dump dumps the
// crash again after its restart).
//
// The same file remembers the last crash dump per guest (uuid, else name) for
// MinInterval=, because a crash-looping guest comes back with a new domid.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "xendump/hypervisor.hpp"

namespace xendump::daemon {

struct CrashKey {
    uint32_t domid = 0;
    std::string uuid;
    auto operator<=>(const CrashKey&) const = default;
};

class CrashBook {
public:
    // Loads `state_file` when it exists (a damaged file is set aside and
    // reported through `warning`).
    explicit CrashBook(std::filesystem::path state_file);
    const std::string& load_warning() const { return load_warning_; }

    // Given the current domain list: forgets instances that ended and returns
    // the crashes that are neither handled nor already in progress (which are
    // then marked in progress, in memory only).
    std::vector<CrashKey> observe(const std::vector<DomainInfo>& domains);

    // The dump of `key` finished (written, failed, refused or skipped): never
    // again for this instance. Persists the state.
    void mark_handled(const CrashKey& key);
    // The dump was abandoned (shutdown): not handled, retried after a restart.
    void mark_abandoned(const CrashKey& key);

    // MinInterval: true when `guest` had a crash dump less than `interval`
    // seconds before `now`; then counts the skip.
    bool within_min_interval(const std::string& guest, int64_t now, int64_t interval);
    void record_dump_time(const std::string& guest, int64_t now);
    unsigned skipped(const std::string& guest) const;

    bool handled(const CrashKey& key) const { return handled_.count(key) != 0; }

private:
    void save() const;

    std::filesystem::path file_;
    std::string load_warning_;
    std::set<CrashKey> handled_;
    std::set<CrashKey> in_progress_;
    std::map<std::string, int64_t> last_dump_;
    std::map<std::string, unsigned> skipped_;
};

}  // namespace xendump::daemon
