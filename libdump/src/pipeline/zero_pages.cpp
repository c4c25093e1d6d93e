#include "pipeline/zero_pages.hpp"

#include <cstdint>
#include <cstring>

#include "xendump/format.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "util/util.hpp"

namespace xendump::pipeline {

namespace {
using util::kPage;
}

const std::byte* zero_page() {
    alignas(64) static const std::byte zeros[kPage] = {};
    return zeros;
}

bool is_zero_page(const std::byte* p) { return kernel::is_zero_page(std::span(p, kPage)); }

void classify_zero_pages(PageBatch& b) {
    // A page a selector left out before it was read is not looked at; a
    // page read from a hole of the source is the shared zero page.
    for (size_t i = 0; i < b.count; ++i)
        b.zero[i] = b.keep[i] && (b.unreadable[i] || b.page[i] == zero_page() || is_zero_page(b.page[i]));
}

}  // namespace xendump::pipeline
