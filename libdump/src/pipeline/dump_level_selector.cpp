#include "pipeline/dump_level_selector.hpp"

namespace xendump::pipeline {

DumpLevelSelector::DumpLevelSelector(const kernel::PageSelection& selection)
    : kept_(selection), by_pfn_(kept_), drop_zero_((selection.level & kernel::kExcludeZero) != 0) {}

void DumpLevelSelector::select(PageBatch& batch) const {
    by_pfn_.select(batch);
    if (drop_zero_) zeros_.select(batch);
}

}  // namespace xendump::pipeline
