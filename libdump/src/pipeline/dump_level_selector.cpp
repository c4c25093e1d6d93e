#include "pipeline/dump_level_selector.hpp"

namespace xendump::pipeline {

DumpLevelSelector::DumpLevelSelector(const kernel::PageSelection& selection)
    : kept_(selection), by_pfn_(kept_) {}

void DumpLevelSelector::select(PageBatch& batch) const {
    by_pfn_.select(batch);
}

}  // namespace xendump::pipeline
