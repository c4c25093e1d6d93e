#include "legacy/legacy_page_source.hpp"

#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {
namespace {
using util::kPage;
}

void LegacyPageSource::read_pages(size_t first, size_t count, std::span<std::byte> out,
                                  std::span<uint8_t> unreadable) {
    if (first > layout_.slots.size() || layout_.slots.size() - first < count || out.size() < count * kPage)
        throw Error("page request out of range", src_.name());
    size_t i = 0;
    while (i < count) {
        // Read runs of consecutive slots with one pread each.
        size_t run = 1;
        while (i + run < count && layout_.slots[first + i + run] == layout_.slots[first + i] + run) ++run;
        src_.read(file_.page_offset(layout_.slots[first + i]), out.subspan(i * kPage, run * kPage), "pages");
        for (size_t k = 0; k < run && i + k < unreadable.size(); ++k) unreadable[i + k] = 0;
        i += run;
    }
}

std::optional<FileRange> LegacyPageSource::file_range(size_t first, size_t count) const {
    if (count == 0 || first > layout_.slots.size() || layout_.slots.size() - first < count) return std::nullopt;
    uint64_t slot0 = layout_.slots[first];
    for (size_t k = 1; k < count; ++k)
        if (layout_.slots[first + k] != slot0 + k) return std::nullopt;
    return src_.file_range(file_.page_offset(slot0));
}

}  // namespace xendump::legacy
