#include "kdump/kept_entries.hpp"

#include <algorithm>
#include <string>

#include "xendump/error.hpp"

namespace xendump::kdump {

namespace {

// A mark at least every kMarkKept kept entries and every kMarkScanned
// entries of the source: no lookup scans more than that many.
constexpr uint64_t kMarkKept = 4096;
constexpr uint64_t kMarkScanned = 65536;
constexpr uint64_t kScanWindow = 4096;  // entries read at a time while scanning

}  // namespace

KeptEntries::KeptEntries(const PageSource& all, const kernel::PfnBitmap& kept) : all_(all), kept_(kept) {
    uint64_t since_kept = kMarkKept, since_scanned = kMarkScanned;
    for_each_entry_window(all_, [&](uint64_t first, std::span<const PageEntry> w) {
        for (size_t i = 0; i < w.size(); ++i) {
            ++since_scanned;
            if (!kept_.test(w[i].pfn)) continue;
            if (since_kept >= kMarkKept || since_scanned >= kMarkScanned) {
                marks_.push_back({count_, first + i, w[i].pfn});
                since_kept = since_scanned = 0;
            }
            ++count_;
            ++since_kept;
        }
    });
    marks_.shrink_to_fit();
}

template <class F>
void KeptEntries::scan_from(const Mark& m, F&& f) const {
    uint64_t k = m.kept;
    for_each_entry_window_from(
        all_, m.source,
        [&](uint64_t, std::span<const PageEntry> w) {
            for (const PageEntry& e : w)
                if (kept_.test(e.pfn) && !f(k++, e)) return false;
            return true;
        },
        kScanWindow);
}

void KeptEntries::read_entries(uint64_t first, std::span<PageEntry> out) const {
    if (out.empty()) return;
    if (first > count_ || out.size() > count_ - first)
        throw Error("internal error: kept entries " + std::to_string(first) + "+" + std::to_string(out.size()) +
                    " past the end (" + std::to_string(count_) + ")");
    auto m = std::upper_bound(marks_.begin(), marks_.end(), first,
                              [](uint64_t k, const Mark& x) { return k < x.kept; });
    size_t filled = 0;
    scan_from(*std::prev(m), [&](uint64_t k, const PageEntry& e) {
        if (k < first) return true;
        out[filled++] = e;
        return filled < out.size();
    });
    if (filled != out.size())
        throw Error("internal error: the page source changed under its kept entries");
}

std::optional<uint64_t> KeptEntries::index_of_pfn(uint64_t pfn) const {
    if (!kept_.test(pfn) || marks_.empty() || pfn < marks_.front().pfn) return std::nullopt;
    auto m = std::upper_bound(marks_.begin(), marks_.end(), pfn, [](uint64_t p, const Mark& x) { return p < x.pfn; });
    std::optional<uint64_t> found;
    scan_from(*std::prev(m), [&](uint64_t k, const PageEntry& e) {
        if (e.pfn == pfn) found = k;
        return e.pfn < pfn;
    });
    return found;
}

void KeptEntries::read_pages(size_t, size_t, std::span<std::byte>, std::span<uint8_t>) {
    throw Error("internal error: a list of kept entries has no pages to read");
}

}  // namespace xendump::kdump
