// Sets a PfnBitmap's bits a run of consecutive pfns at a time: one
// PfnBitmap::set_range per run (whole blocks filled without being read or
// written) instead of a call per pfn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "xendump/kernel/dump_level.hpp"
#include "xendump/page_source.hpp"

namespace xendump::kernel {

// The pfns pfn_at(i) for i < n with keep(i), ascending.
template <class PfnAt, class Keep>
void set_runs(PfnBitmap& bits, size_t n, PfnAt&& pfn_at, Keep&& keep) {
    uint64_t first = 0, end = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!keep(i)) continue;
        const uint64_t pfn = pfn_at(i);
        if (pfn == end && end != first) {
            ++end;
            continue;
        }
        bits.set_range(first, end);
        first = pfn;
        end = pfn + 1;
    }
    bits.set_range(first, end);
}

// Every entry's pfn.
inline void set_pfns(PfnBitmap& bits, std::span<const PageEntry> entries) {
    set_runs(bits, entries.size(), [&](size_t i) { return entries[i].pfn; }, [](size_t) { return true; });
}

}  // namespace xendump::kernel
