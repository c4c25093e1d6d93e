// The maximal runs of consecutive pfns of a page source (one PT_LOAD each,
// xen-dump-core(5) "Program headers"), found a window of entries at a time.
#pragma once

#include <cstdint>

#include "xendump/page_source.hpp"

namespace xendump::writer {

// Calls f(index, pfn, count) for each run in order: entries [index, index +
// count) hold pfns pfn … pfn + count - 1.
template <class F>
void for_each_run(const PageSource& source, F&& f) {
    uint64_t index = 0, pfn = 0, count = 0;
    for_each_entry_window(source, [&](uint64_t first, std::span<const PageEntry> window) {
        for (size_t k = 0; k < window.size(); ++k) {
            if (count && window[k].pfn == pfn + count) {
                ++count;
                continue;
            }
            if (count) f(index, pfn, count);
            index = first + k;
            pfn = window[k].pfn;
            count = 1;
        }
    });
    if (count) f(index, pfn, count);
}

}  // namespace xendump::writer
