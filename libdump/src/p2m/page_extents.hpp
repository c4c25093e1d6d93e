// A guest's present pages as extents (issue 19): stretches of entries whose
// pfns and gmfns both rise by one from entry to entry. An HVM/PVH guest
// (gmfn == pfn) has one extent per run of present gfns; a PV guest's frames
// come in long stretches too. 32 bytes an extent, whatever the pages in it:
// the dumper's list of pages, which it reads a window at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "xendump/page_source.hpp"

namespace xendump {

class PageExtents {
public:
    struct Extent {
        uint64_t index, pfn, gmfn, count;  // entries [index, index + count)
    };
    struct PfnRange {
        uint64_t first, end;  // [first, end)
    };

    // Appends entries above every pfn so far (throws Error otherwise).
    void append(std::span<const PageEntry> entries);
    // The same list without the pfns of `ranges` (ascending, disjoint).
    PageExtents without(std::span<const PfnRange> ranges) const;

    uint64_t size() const { return size_; }
    std::span<const Extent> extents() const { return extents_; }
    // Entries [first, first + out.size()); throws Error past the end.
    void read(uint64_t first, std::span<PageEntry> out) const;
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const;

private:
    void push(uint64_t pfn, uint64_t gmfn, uint64_t count);

    std::vector<Extent> extents_;
    uint64_t size_ = 0;
};

}  // namespace xendump
