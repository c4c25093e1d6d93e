// Every discovery in the p2m tests also runs the windowed walk (issue 19)
// and checks that its windows, less FrameDuplicates' drops, are exactly the
// full walk's pages, with the same warnings, frames and header.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "p2m/p2m.hpp"
#include "p2m/p2m_windows.hpp"

namespace xendump::test {

inline bool same_pages(const std::vector<PageEntry>& a, const std::vector<PageEntry>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const PageEntry& x, const PageEntry& y) { return x.pfn == y.pfn && x.gmfn == y.gmfn; });
}

// The windowed walk's result in P2mMap form (pages less the duplicates).
inline P2mMap discover_windowed(Hypervisor& hv, const DomainInfo& info, const P2mOptions& options = {}) {
    P2mWindows w(hv, info, options);
    FrameDuplicates dup;
    std::vector<PageEntry> seen, win;
    while (w.next(win)) {
        EXPECT_LE(win.size(), size_t{512} * 1024) << "a window holds at most 512 p2m pages' entries";
        EXPECT_TRUE(seen.empty() || win.front().pfn > seen.back().pfn) << "windows come in ascending pfn order";
        dup.add(win);
        seen.insert(seen.end(), win.begin(), win.end());
    }
    dup.finish();
    P2mMap out = w.header();
    out.warnings = w.warnings(&dup);
    for (const PageEntry& e : seen)
        if (!dup.contains(e.pfn)) out.pages.push_back(e);
    EXPECT_EQ(out.pages.size(), seen.size() - dup.dropped_pages());
    return out;
}

// discover_p2m(), checked against the windowed walk. The windowed walk runs
// first and a fake hypervisor's counts of mapping and page-type calls are put
// back after it, so the tests' bounds on discover_p2m()'s calls still hold
// for it alone.
template <class Hv>
P2mMap discover_checked(Hv& hv, const DomainInfo& info, const P2mOptions& options = {}) {
    P2mMap win;
    if constexpr (requires { hv.map_calls; hv.type_calls; }) {
        const auto calls = hv.map_calls, mapped = hv.mapped_frames, types = hv.type_calls, typed = hv.typed_gfns;
        win = discover_windowed(hv, info, options);
        hv.map_calls = calls;
        hv.mapped_frames = mapped;
        hv.type_calls = types;
        hv.typed_gfns = typed;
    } else {
        win = discover_windowed(hv, info, options);
    }
    P2mMap full = discover_p2m(hv, info, options);
    EXPECT_EQ(win.kind, full.kind);
    EXPECT_EQ(win.p2m_size, full.p2m_size);
    EXPECT_EQ(win.guest_width, full.guest_width);
    EXPECT_EQ(win.shared_info, full.shared_info);
    EXPECT_EQ(win.p2m_frames, full.p2m_frames);
    EXPECT_EQ(win.warnings, full.warnings);
    EXPECT_TRUE(same_pages(win.pages, full.pages)) << "windowed walk: " << win.pages.size() << " pages, full walk: "
                                         << full.pages.size();
    return full;
}

}  // namespace xendump::test
