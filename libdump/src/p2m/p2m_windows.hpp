// The p2m walk in windows (issue 19): the same present pages discover_p2m()
// returns, handed out in ascending pfn order a bounded window at a time, so
// that a dumper holds one window (at most 256Ki entries, 4 MiB) instead of
// 16-24 bytes per guest page. Duplicate frames (PV: a frame a lower pfn
// already names) are found out of core by FrameDuplicates, from the windows
// as they pass; the pages to drop are known once the last window was seen.
//
// A writer uses it in two passes over a paused guest:
//   1. P2mWindows w(hv, info); while (w.next(win)) dup.add(win);
//      dups = dup.finish();  // count = pages seen - dups.dropped_pages
//   2. P2mWindows again (or the writer's own re-read of the p2m pages, which
//      are 1/512 of the guest) and, per window, skip dups.contains(pfn).
// Memory: one window, the leaf frame list (8 bytes a p2m page: 1/512 byte a
// guest page), and FrameDuplicates' 24 bytes per stretch of entries whose
// pfns and frames both rise by one (a handful for a usual guest).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "p2m/p2m.hpp"

namespace xendump {

class P2mWindows {
public:
    // Everything discover_p2m() does before it reads the entries (shared
    // info, p2m size, the structure walk); throws the same Errors.
    P2mWindows(Hypervisor& hv, const DomainInfo& info, const P2mOptions& options = {});
    ~P2mWindows();
    P2mWindows(const P2mWindows&) = delete;
    P2mWindows& operator=(const P2mWindows&) = delete;

    // kind, p2m_size, guest_width, shared_info, p2m_frames; pages stays empty.
    const P2mMap& header() const;
    // Replaces `window` with the next present pages (ascending pfn, above
    // every earlier window; duplicates not dropped); false when none is left.
    bool next(std::vector<PageEntry>& window);
    // PV: the frame of each p2m page as the walk found it (index j holds
    // pfns j * entries-per-page …; ~0 where there is none); empty for HVM/PVH.
    std::span<const uint64_t> leaf_frames() const;
    // The pfns examined so far, of header().p2m_size: progress.
    uint64_t examined() const;
    // After the last window: discover_p2m()'s warnings, in its order, with
    // `duplicates`' line (after finish()) where discover_p2m() puts its own.
    // Throws Error when no page was present.
    std::vector<std::string> warnings(const class FrameDuplicates* duplicates = nullptr);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// Out-of-core duplicate-frame check: keeps stretches, not pages.
class FrameDuplicates {
public:
    // Entries in ascending pfn order, window after window.
    void add(std::span<const PageEntry> window);
    // Computes the pfns to drop (each frame keeps its lowest pfn).
    void finish();

    // After finish(): the pfn ranges [first, end) to drop, ascending, disjoint.
    struct Range {
        uint64_t first, end;
    };
    const std::vector<Range>& dropped() const { return dropped_; }
    uint64_t dropped_pages() const { return dropped_pages_; }
    bool contains(uint64_t pfn) const;
    // The discover_p2m() warning line, empty without duplicates.
    const std::string& warning() const { return warning_; }
    size_t stretches() const { return stretches_.size(); }

private:
    struct Stretch {
        uint64_t pfn, gmfn, count;
    };
    std::vector<Stretch> stretches_;
    bool ascending_ = true;  // every gmfn above the one before: no duplicate possible
    std::vector<Range> dropped_;
    uint64_t dropped_pages_ = 0;
    std::string warning_;
};

}  // namespace xendump
