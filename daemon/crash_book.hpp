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
//
// A dump that failed for want of room (a full dump filesystem) does not end
// the instance: it waits, with its reason, to be retried when there is room.
// Saving never throws: the state lives on in memory, save_error() tells why
// the file could not be written, and the next change (or flush()) tries again.
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

struct CrashRetry {
    std::string error;     // why the last attempt failed
    unsigned attempts = 0; // failed attempts so far
    int64_t not_before = 0;
    bool waiting = true;   // false while a retry is in progress
    uint64_t room_needed = 0;  // the room the last attempt needed (DumpJobResult::room_needed)
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
    // The dump failed for want of room: not handled; waits until `not_before`
    // (unix seconds) and for room (the caller's check) to be retried.
    void mark_waiting(const CrashKey& key, const std::string& error, int64_t not_before, uint64_t room_needed = 0);
    // Waiting crashes whose time has come (still waiting: take_retry() one to start it).
    std::vector<CrashKey> due_retries(int64_t now) const;
    void take_retry(const CrashKey& key);  // waiting -> in progress
    // Crashes that failed for want of room and are not handled yet.
    const std::map<CrashKey, CrashRetry>& retries() const { return retries_; }

    // Why the state file could not be written last time; empty once it was.
    const std::string& save_error() const { return save_error_; }
    void flush();  // writes the state again when the last save failed

    // MinInterval: true when `guest` had a crash dump less than `interval`
    // seconds before `now`; then counts the skip.
    bool within_min_interval(const std::string& guest, int64_t now, int64_t interval);
    void record_dump_time(const std::string& guest, int64_t now);
    unsigned skipped(const std::string& guest) const;

    bool handled(const CrashKey& key) const { return handled_.count(key) != 0; }

private:
    void save();
    void write_file() const;  // throws

    std::filesystem::path file_;
    std::string load_warning_;
    std::set<CrashKey> handled_;
    std::set<CrashKey> in_progress_;
    std::map<std::string, int64_t> last_dump_;
    std::map<std::string, unsigned> skipped_;
    std::map<CrashKey, CrashRetry> retries_;
    std::string save_error_;
};

}  // namespace xendump::daemon
