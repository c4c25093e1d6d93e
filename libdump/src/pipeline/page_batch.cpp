#include "pipeline/page_batch.hpp"

#include <algorithm>

#include "xendump/format.hpp"

namespace xendump::pipeline {

std::span<const std::byte> PageBatch::bytes(size_t i) const {
    return std::span<const std::byte>(page[i], format::kPageSize);
}

bool PageBatch::all_kept() const {
    return std::all_of(keep.begin(), keep.begin() + static_cast<std::ptrdiff_t>(count), [](uint8_t k) { return k; });
}

void PageBatch::reserve(size_t pages) {
    page.resize(pages);
    unreadable.resize(pages);
    zero.resize(pages);
    keep.resize(pages);
}

}  // namespace xendump::pipeline
