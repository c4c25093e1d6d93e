#include "p2m/page_extents.hpp"

#include <algorithm>
#include <string>

#include "util/runs.hpp"
#include "xendump/error.hpp"

namespace xendump {

void PageExtents::push(uint64_t pfn, uint64_t gmfn, uint64_t count) {
    if (count == 0) return;
    if (!extents_.empty()) {
        Extent& last = extents_.back();
        if (pfn < last.pfn + last.count)
            throw Error("page entries not in strictly ascending pfn order (pfn " + std::to_string(pfn) + " after " +
                        std::to_string(last.pfn + last.count - 1) + ")");
        if (pfn == last.pfn + last.count && gmfn == last.gmfn + last.count) {
            last.count += count;
            size_ += count;
            return;
        }
    }
    extents_.push_back({size_, pfn, gmfn, count});
    size_ += count;
}

void PageExtents::append(std::span<const PageEntry> entries) {
    for (const PageEntry& e : entries) push(e.pfn, e.gmfn, 1);
}

PageExtents PageExtents::without(std::span<const PfnRange> ranges) const {
    PageExtents out;
    auto r = ranges.begin();
    for (const Extent& x : extents_) {
        uint64_t pfn = x.pfn;
        const uint64_t end = x.pfn + x.count;
        while (pfn < end) {
            while (r != ranges.end() && r->end <= pfn) ++r;
            if (r == ranges.end() || r->first >= end) {
                out.push(pfn, x.gmfn + (pfn - x.pfn), end - pfn);
                break;
            }
            if (r->first > pfn) out.push(pfn, x.gmfn + (pfn - x.pfn), r->first - pfn);
            pfn = std::min(end, std::max(pfn, r->end));
        }
    }
    return out;
}

void PageExtents::read(uint64_t first, std::span<PageEntry> out) const {
    if (first > size_ || out.size() > size_ - first)
        throw Error("page entries [" + std::to_string(first) + ", +" + std::to_string(out.size()) + ") past the " +
                    std::to_string(size_) + " present pages");
    if (out.empty()) return;
    // The extent holding `first`: extents_ start at index 0 and cover [0, size_).
    auto it = util::run_at_or_before(extents_, first, &Extent::index);
    size_t k = 0;
    for (uint64_t at = first; k < out.size(); ++it) {
        const uint64_t off = at - it->index;
        const uint64_t n = std::min<uint64_t>(it->count - off, out.size() - k);
        for (uint64_t j = 0; j < n; ++j) out[k + j] = {it->pfn + off + j, it->gmfn + off + j};
        k += n;
        at += n;
    }
}

std::optional<uint64_t> PageExtents::index_of_pfn(uint64_t pfn) const {
    const auto it = util::run_holding(extents_, pfn, &Extent::pfn, &Extent::count);
    if (it == extents_.end()) return std::nullopt;
    return it->index + (pfn - it->pfn);
}

}  // namespace xendump
