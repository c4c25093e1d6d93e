// The storage policy, as a pure function: given what is stored (times, sizes,
// domains), the limits and the filesystem's numbers, decide what to delete and
// whether a new dump of a given expected size may start. Nothing here touches
// a file, so every rule is unit-tested; dump_dir.hpp feeds it a directory.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "units.hpp"

namespace xendump::daemon {

struct StoredDump {
    std::string id;        // the dump's path (or the sidecar's when there is no dump)
    std::string domain;    // grouping key for KeepPerDomain (uuid, else name)
    int64_t time = 0;      // unix seconds; older goes first
    uint64_t bytes = 0;    // on disk (st_blocks * 512), dump + sidecar
    bool in_use = false;   // being written: never deleted
    bool crash = false;    // a crash dump that was written: outranks the others
};

struct RetentionLimits {
    std::optional<SizeLimit> max_use;
    std::optional<SizeLimit> keep_free;
    unsigned keep_per_domain = 0;    // 0: no limit
    std::chrono::seconds max_age{0}; // 0: no limit
};

struct FilesystemSpace {
    uint64_t size = 0;   // f_blocks * f_frsize
    uint64_t free = 0;   // f_bavail * f_frsize
};

struct RetentionDecision {
    std::vector<std::string> remove;  // ids, in the order they go (see decide_retention)
    bool fits = true;                 // the incoming dump fits after the removals
    std::string why_not;              // when !fits: which limit refuses it
};

// `incoming` is the expected size of a dump about to start (0 for a plain
// vacuum). Crash dumps outrank the others (manual dumps, records of dumps
// that failed, files of other tools): MaxUse= and KeepFree= delete the others
// first, oldest first, then crash dumps, oldest first; KeepPerDomain= keeps a
// domain's newest crash dumps first and fills up with its newest others;
// MaxAge= goes by age alone. When the incoming dump cannot fit
// even after deleting everything deletable, it is refused and only what the
// limits demand on their own is removed.
RetentionDecision decide_retention(const std::vector<StoredDump>& stored, const RetentionLimits& limits,
                                   const FilesystemSpace& fs, int64_t now, uint64_t incoming = 0);

// The room a dump being written gets as it grows (WriteOptions::room), by
// the same limits. `needed` is the least it must occupy to go on, `wanted`
// the most it could come to (both counting the other dumps being written;
// `fs.free` as if none of them were on disk yet). The most that fits without
// removing a dump the limits would keep is granted, up to `wanted`; when not
// even `needed` fits so, the least valued dumps go (decide_retention's
// order), only as many as `needed` takes; when it cannot fit at all,
// nothing goes and `granted` is 0.
struct RoomGrant {
    uint64_t granted = 0;
    std::vector<std::string> remove;  // to remove first
    std::string why_not;              // when granted is 0
};
RoomGrant grant_room(const std::vector<StoredDump>& stored, const RetentionLimits& limits, const FilesystemSpace& fs,
                     int64_t now, uint64_t needed, uint64_t wanted);

}  // namespace xendump::daemon
