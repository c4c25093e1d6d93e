// The maximal runs of consecutive pfns of a page source (one PT_LOAD each,
// xen-dump-core(5) "Program headers"), or of consecutive gmfns (makedumpfile's
// view), found a window of entries at a time.
#pragma once

#include <cstdint>

#include "xendump/page_source.hpp"

namespace xendump::elfcore {

inline uint64_t pfn_of(const PageEntry& e) { return e.pfn; }
inline uint64_t gmfn_of(const PageEntry& e) { return e.gmfn; }

// Calls f(index, k, count) for each run in order: entries [index, index +
// count) have key(entry) k … k + count - 1 (key: pfn_of or gmfn_of).
template <class Key, class F>
void for_each_run(const PageSource& source, Key key, F&& f) {
    uint64_t index = 0, start = 0, count = 0;
    for_each_entry_window(source, [&](uint64_t first, std::span<const PageEntry> window) {
        for (size_t k = 0; k < window.size(); ++k) {
            const uint64_t v = key(window[k]);
            if (count && v == start + count) {
                ++count;
                continue;
            }
            if (count) f(index, start, count);
            index = first + k;
            start = v;
            count = 1;
        }
    });
    if (count) f(index, start, count);
}

// Maximal runs of consecutive pfns (one PT_LOAD each).
inline uint64_t count_runs(const PageSource& source) {
    uint64_t runs = 0;
    for_each_run(source, pfn_of, [&](uint64_t, uint64_t, uint64_t) { ++runs; });
    return runs;
}

}  // namespace xendump::elfcore
