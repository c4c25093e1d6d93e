// PageSource's defaults (xendump/page_source.hpp): the windowed accessors
// over entries(), and entries() built once from the windows.
#include "xendump/page_source.hpp"

#include <algorithm>
#include <string>

#include "xendump/error.hpp"

namespace xendump {

std::span<const PageEntry> PageSource::entries() const {
    if (!all_) {
        auto all = std::make_unique<std::vector<PageEntry>>(static_cast<size_t>(nr_entries()));
        read_entries(0, *all);
        all_ = std::move(all);
    }
    return *all_;
}

void PageSource::read_entries(uint64_t first, std::span<PageEntry> out) const {
    const auto all = entries();
    if (first > all.size() || out.size() > all.size() - first)
        throw Error("page entries [" + std::to_string(first) + ", +" + std::to_string(out.size()) +
                    ") past the source's " + std::to_string(all.size()));
    std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(first), out.size(), out.begin());
}

std::optional<uint64_t> PageSource::index_of_pfn(uint64_t pfn) const {
    uint64_t lo = 0, hi = nr_entries();  // the entry sits in [lo, hi) if anywhere
    PageEntry e{};
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        read_entries(mid, std::span(&e, 1));
        if (e.pfn == pfn) return mid;
        if (e.pfn < pfn)
            lo = mid + 1;
        else
            hi = mid;
    }
    return std::nullopt;
}

}  // namespace xendump
