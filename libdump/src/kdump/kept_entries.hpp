// The entries of a page source whose pfns a bitmap keeps, as a page source
// without pages: the compact writer's list of stored pages for a dump level
// (write_kdump_selection), read a window at a time from the source it
// filters. It holds a mark every few thousand entries (24 bytes each), not
// the list; the bitmap (the caller's) keeps most of its bits in a file.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "xendump/kernel/dump_level.hpp"
#include "xendump/page_source.hpp"

namespace xendump::kdump {

class KeptEntries final : public PageSource {
public:
    // One pass over `all`'s entries (in windows) counts the kept ones and
    // places the marks. Both arguments must outlive this.
    KeptEntries(const PageSource& all, const kernel::PfnBitmap& kept);

    uint64_t nr_entries() const override { return count_; }
    void read_entries(uint64_t first, std::span<PageEntry> out) const override;
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const override;
    void read_pages(size_t, size_t, std::span<std::byte>, std::span<uint8_t>) override;

private:
    // Where a stretch of the scan starts: the kept index and the source's
    // entry index (and its pfn) of the first kept entry at or after it.
    struct Mark {
        uint64_t kept, source, pfn;
    };
    // Scans `all_` from `m` calling f(kept_index, entry) for each kept entry
    // until f returns false.
    template <class F>
    void scan_from(const Mark& m, F&& f) const;

    const PageSource& all_;
    const kernel::PfnBitmap& kept_;
    uint64_t count_ = 0;
    std::vector<Mark> marks_;  // ascending in all three
};

}  // namespace xendump::kdump
