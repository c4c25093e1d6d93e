// What the format writer consumes: the present pages of a guest, in
// ascending pfn order, and a batch reader of their contents. The dumper (live
// guest through a hypervisor) and the converter (an old file) are both page
// sources; the writer knows neither.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "xendump/format.hpp"

namespace xendump {

using PageEntry = format::P2mEntry;  // {pfn, gmfn}

// True when every gmfn is above the one before (the usual guest, whose frames
// rise with its pfns): then no gmfn repeats and pfn order is gmfn order.
inline bool gmfns_ascending(std::span<const PageEntry> entries) {
    for (size_t i = 1; i < entries.size(); ++i)
        if (entries[i].gmfn <= entries[i - 1].gmfn) return false;
    return true;
}

class PageSource {
public:
    virtual ~PageSource() = default;

    // The present pages: strictly ascending pfn. For HVM/PVH gmfn == pfn.
    //
    // A source overrides either entries() (it holds the whole list, 16
    // bytes a page) or nr_entries() and read_entries() (it hands the list
    // out in windows: the writers take nothing else, so their memory does
    // not grow with the guest, see xendump/writer.hpp). The defaults fill
    // each side from the other; entries() then builds the whole list once,
    // on first use (16 bytes a page), for the callers that need a span.
    virtual std::span<const PageEntry> entries() const;
    virtual uint64_t nr_entries() const { return entries().size(); }
    // Entries [first, first + out.size()) into `out`; throws Error past the end.
    virtual void read_entries(uint64_t first, std::span<PageEntry> out) const;
    // The index of the entry for `pfn`, or nullopt when the pfn is not present.
    // Default: a binary search through read_entries() (O(log n) single reads).
    virtual std::optional<uint64_t> index_of_pfn(uint64_t pfn) const;

    // Reads `count` pages starting at entry index `first` into `out`
    // (count * kPageSize bytes). A page that cannot be read gets
    // unreadable[i] = 1 and its bytes in `out` must be zeroed by the source.
    // Throws Error for failures that end the dump.
    virtual void read_pages(size_t first, size_t count, std::span<std::byte> out,
                            std::span<uint8_t> unreadable) = 0;

    // How many pages the source prefers per read_pages call.
    virtual size_t preferred_batch() const { return 1024; }

private:
    mutable std::unique_ptr<std::vector<PageEntry>> all_;  // entries()' default, built once
};

// Calls f(first, window) for consecutive windows of at most `window` entries
// of `source`, in order from entry `from`, until f returns false or the list
// ends: `window` entries in memory at a time.
template <class F>
void for_each_entry_window_from(const PageSource& source, uint64_t from, F&& f, uint64_t window = 65536) {
    const uint64_t n = source.nr_entries();
    if (from >= n) return;
    std::vector<PageEntry> w(static_cast<size_t>(n - from < window ? n - from : window));
    for (uint64_t at = from; at < n; at += w.size()) {
        const size_t k = static_cast<size_t>(n - at < w.size() ? n - at : w.size());
        source.read_entries(at, std::span(w).first(k));
        if (!f(at, std::span<const PageEntry>(w).first(k))) return;
    }
}

// The same over the whole list: f(first, window) returns nothing.
template <class F>
void for_each_entry_window(const PageSource& source, F&& f, uint64_t window = 65536) {
    for_each_entry_window_from(
        source, 0,
        [&](uint64_t first, std::span<const PageEntry> w) {
            f(first, w);
            return true;
        },
        window);
}

// One past the last present pfn (0 without pages): the size of a bitmap of
// the source's pfns.
inline uint64_t end_pfn(const PageSource& source) {
    const uint64_t n = source.nr_entries();
    if (n == 0) return 0;
    PageEntry last{};
    source.read_entries(n - 1, std::span(&last, 1));
    return last.pfn + 1;
}

}  // namespace xendump
