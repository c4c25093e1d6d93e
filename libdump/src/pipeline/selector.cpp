#include "pipeline/selector.hpp"

#include <algorithm>

namespace xendump::pipeline {

void ZeroPageSelector::select(PageBatch& b) const {
    for (size_t i = 0; i < b.count; ++i)
        if (b.zero[i] && !b.unreadable[i]) b.keep[i] = 0;
}

bool EntrySet::contains(uint64_t pfn) const {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), pfn,
                               [](const PageEntry& e, uint64_t p) { return e.pfn < p; });
    return it != entries_.end() && it->pfn == pfn;
}

void PfnSetSelector::select(PageBatch& b) const {
    for (size_t i = 0; i < b.count; ++i)
        if (!keep_.contains(b.pfn(i))) b.keep[i] = 0;
}

}  // namespace xendump::pipeline
