// The PFN->GMFN table as both encoders store it: a v1 file's NT_XEN_P2M for
// every guest type, a compact file's for PV guests, and the digest of it
// that both record.
#pragma once

#include <span>
#include <vector>

#include "xendump/page_source.hpp"

namespace xendump::elfcore {

// The PFN->GMFN table's descriptor (xen-dump-core(5) "The PFN->GMFN table")
// a window at a time: f(window) with the source's entries, gmfn = pfn for
// HVM/PVH.
template <class F>
void for_each_table_window(const PageSource& source, bool gmfn_is_pfn, F&& f) {
    std::vector<PageEntry> table;
    for_each_entry_window(source, [&](uint64_t, std::span<const PageEntry> window) {
        if (!gmfn_is_pfn) return f(window);
        table.assign(window.begin(), window.end());
        for (PageEntry& e : table) e.gmfn = e.pfn;
        f(std::span<const PageEntry>(table));
    });
}

}  // namespace xendump::elfcore
