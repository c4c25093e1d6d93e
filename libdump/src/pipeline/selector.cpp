#include "pipeline/selector.hpp"

#include <algorithm>

namespace xendump::pipeline {

void ZeroPageSelector::select(PageBatch& b) const {
    for (size_t i = 0; i < b.count; ++i)
        if (b.zero[i] && !b.unreadable[i]) b.keep[i] = 0;
}

void PfnSetSelector::select(PageBatch& b) const {
    for (size_t i = 0; i < b.count; ++i)
        if (!keep_.contains(b.pfn(i))) b.keep[i] = 0;
}

}  // namespace xendump::pipeline
