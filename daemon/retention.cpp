#include "retention.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include "cli.hpp"

namespace xendump::daemon {

namespace {

struct Plan {
    std::vector<bool> removed;
    uint64_t used = 0;
    uint64_t freed = 0;
};

// Deletes the least valued removable dumps while `still_too_much()` says so.
template <typename Pred>
void remove_least_valued_while(const std::vector<StoredDump>& stored, const std::vector<size_t>& by_value, Plan& plan,
                               Pred still_too_much) {
    for (size_t idx : by_value) {
        if (!still_too_much()) return;
        if (plan.removed[idx] || stored[idx].in_use) continue;
        plan.removed[idx] = true;
        plan.used -= stored[idx].bytes;
        plan.freed += stored[idx].bytes;
    }
}

// Applies every limit, counting `incoming` as already stored. `by_value`
// lists the dumps least valued first (others before crash dumps, oldest first
// within each). Returns whether the limits are met at the end.
bool apply_limits(const std::vector<StoredDump>& stored, const std::vector<size_t>& by_value,
                  const RetentionLimits& limits, const FilesystemSpace& fs, int64_t now, uint64_t incoming, Plan& plan,
                  std::string& why_not) {
    if (limits.max_age.count() > 0) {
        for (size_t idx : by_value) {
            const auto& d = stored[idx];
            if (!d.in_use && !plan.removed[idx] && now - d.time > limits.max_age.count()) {
                plan.removed[idx] = true;
                plan.used -= d.bytes;
                plan.freed += d.bytes;
            }
        }
    }
    if (limits.keep_per_domain > 0) {
        std::map<std::string, unsigned> kept;
        // Most valued first: the first keep_per_domain of each domain stay.
        for (auto it = by_value.rbegin(); it != by_value.rend(); ++it) {
            size_t idx = *it;
            const auto& d = stored[idx];
            if (plan.removed[idx]) continue;
            if (++kept[d.domain] > limits.keep_per_domain && !d.in_use) {
                plan.removed[idx] = true;
                plan.used -= d.bytes;
                plan.freed += d.bytes;
            }
        }
    }
    bool ok = true;
    if (limits.max_use) {
        uint64_t max_use = limits.max_use->resolve(fs.size);
        auto over = [&] { return plan.used + incoming > max_use; };
        remove_least_valued_while(stored, by_value, plan, over);
        if (over()) {
            ok = false;
            why_not = "MaxUse=" + limits.max_use->to_string() + " (" + cli::human_bytes(max_use) +
                      ") leaves no room for " + cli::human_bytes(incoming);
        }
    }
    uint64_t keep_free = limits.keep_free ? limits.keep_free->resolve(fs.size) : 0;
    auto short_of_space = [&] { return fs.free + plan.freed < keep_free + incoming; };
    remove_least_valued_while(stored, by_value, plan, short_of_space);
    if (ok && short_of_space()) {
        ok = false;
        why_not = "only " + cli::human_bytes(fs.free + plan.freed) + " free for " + cli::human_bytes(incoming) +
                  (keep_free ? " while keeping " + cli::human_bytes(keep_free) + " free (KeepFree=" +
                                   limits.keep_free->to_string() + ")"
                             : std::string());
    }
    return ok;
}

}  // namespace

RetentionDecision decide_retention(const std::vector<StoredDump>& stored, const RetentionLimits& limits,
                                   const FilesystemSpace& fs, int64_t now, uint64_t incoming) {
    std::vector<size_t> by_value(stored.size());
    std::iota(by_value.begin(), by_value.end(), size_t{0});
    std::stable_sort(by_value.begin(), by_value.end(), [&](size_t a, size_t b) {
        return std::pair(stored[a].crash, stored[a].time) < std::pair(stored[b].crash, stored[b].time);
    });
    uint64_t used = 0;
    for (const auto& d : stored) used += d.bytes;

    RetentionDecision decision;
    Plan plan{std::vector<bool>(stored.size(), false), used, 0};
    decision.fits = apply_limits(stored, by_value, limits, fs, now, incoming, plan, decision.why_not);
    if (!decision.fits && incoming > 0) {
        // Refused: do not sacrifice old dumps for a dump that will not be
        // written; remove only what the limits require by themselves.
        plan = Plan{std::vector<bool>(stored.size(), false), used, 0};
        std::string ignored;
        apply_limits(stored, by_value, limits, fs, now, 0, plan, ignored);
    }
    for (size_t idx : by_value)
        if (plan.removed[idx]) decision.remove.push_back(stored[idx].id);
    return decision;
}

RoomGrant grant_room(const std::vector<StoredDump>& stored, const RetentionLimits& limits, const FilesystemSpace& fs,
                     int64_t now, uint64_t needed, uint64_t wanted) {
    // What the limits remove by themselves is no sacrifice for this dump;
    // removing more is (removals grow with the incoming size, in one order).
    const size_t by_themselves = decide_retention(stored, limits, fs, now, 0).remove.size();
    auto without_sacrifice = [&](uint64_t bytes) {
        const auto d = decide_retention(stored, limits, fs, now, bytes);
        return d.fits && d.remove.size() == by_themselves;
    };
    RoomGrant g;
    wanted = std::max(wanted, needed);
    if (without_sacrifice(needed)) {
        // The most up to `wanted` (to 1 MiB): fewer questions as the file grows.
        uint64_t lo = needed, hi = wanted;
        if (without_sacrifice(hi)) lo = hi;
        while (hi - lo > (uint64_t{1} << 20)) {
            const uint64_t mid = lo + (hi - lo) / 2;
            (without_sacrifice(mid) ? lo : hi) = mid;
        }
        g.granted = lo;
        return g;
    }
    auto d = decide_retention(stored, limits, fs, now, needed);
    if (!d.fits) {
        g.why_not = d.why_not;
        return g;
    }
    g.granted = needed;
    g.remove = std::move(d.remove);
    return g;
}

}  // namespace xendump::daemon
