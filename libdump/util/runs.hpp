// The one search over runs: sorted, disjoint stretches of numbers (pfns,
// entry indexes, frames), each a first number and a count, as a dump's page
// runs, the dumper's page extents and the simulator's extents hold them.
// O(log runs). Private, like the rest of libdump/util.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace xendump::util {

// The last run whose first number (member `first`) is at most `key`, or
// end(runs) when every run starts above it. When the runs cover every number
// from the first run's start (a table's indexes), that run holds `key`.
template <class Runs, class Run>
auto run_at_or_before(const Runs& runs, uint64_t key, uint64_t Run::*first) {
    auto it = std::upper_bound(std::begin(runs), std::end(runs), key,
                               [first](uint64_t k, const Run& r) { return k < r.*first; });
    return it == std::begin(runs) ? std::end(runs) : std::prev(it);
}

// The run that holds `key` (first <= key < first + count), or end(runs).
template <class Runs, class Run>
auto run_holding(const Runs& runs, uint64_t key, uint64_t Run::*first, uint64_t Run::*count) {
    auto it = run_at_or_before(runs, key, first);
    if (it != std::end(runs) && key - (*it).*first >= (*it).*count) return std::end(runs);
    return it;
}

}  // namespace xendump::util
