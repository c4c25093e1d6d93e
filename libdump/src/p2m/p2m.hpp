// p2m discovery: which pfns of a guest are present and which machine frame
// backs each. For PV guests the guest's own p2m is read (the three-level tree
// under shared_info.arch.pfn_to_mfn_frame_list_list, or the linear list at
// p2m_vaddr reached through the page tables at p2m_cr3), for HVM/PVH guests
// the gfns' page types are asked of the hypervisor (XEN_DOMCTL_
// getpageframeinfo3, nothing mapped), or the gfns mapped where it refuses
// them. Facts from Xen's
// tools/libs/guest/xg_core_x86.c and xg_sr_save_x86_pv.c.
//
// Everything read from the guest is untrusted. What discover_p2m guarantees:
//  - pages are strictly ascending by pfn, pfn < p2m_size; HVM/PVH: gmfn == pfn;
//  - PV: no gmfn appears twice (a pfn claiming an mfn that a lower pfn
//    already claimed is dropped, with a warning);
//  - PV, when P2mOptions::verify_frames (the default): every gmfn mapped
//    successfully for this domain at discovery time (so it was owned by the
//    domain then); HVM/PVH: every gfn was populated then (its page type said
//    so, or it mapped), broken pages left out. A page can still fail
//    to map later while its contents are read (a live guest ballooning, a
//    dying domain): readers must record such pages as unreadable, not fail;
//  - work and memory are bounded by what the hypervisor reports (maximum
//    gpfn, tot_pages, max_pages), never by what the guest writes: p2m_size
//    is at most p2m_size_limit(info) and the result holds at most one entry
//    per pfn examined and, PV, per frame the domain can own
//    (max(tot_pages, max_pages) + shr_pages), 16 bytes each, with no other
//    per-page memory;
//  - guest oddities that do not stop the dump (invalid or out-of-range
//    entries, frames the domain does not own, duplicates, unmappable p2m
//    pages, more entries than the domain can own frames) become holes and
//    one aggregated warning line each;
//  - a p2m that cannot be walked at all (nothing published, a structure
//    page reused at another level of the walk, i.e. a loop, a virtual range
//    outside the guest's half, no present page at all) ends in an Error
//    naming "domain N".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "xendump/format.hpp"
#include "xendump/hypervisor.hpp"
#include "xendump/page_source.hpp"

namespace xendump {

struct P2mOptions {
    // Map every claimed gmfn once to check that the domain owns it (PV only;
    // an HVM/PVH gfn is present by its page type). Off: out-of-range values are
    // still dropped, but frames of other domains are not detected here; the
    // dumper turns them off because it maps every page to read it anyway, and
    // a frame the domain does not own fails that mapping and is recorded as
    // unreadable (Xen refuses to map another domain's frame for it).
    bool verify_frames = true;
};

struct P2mMap {
    format::P2mKind kind = format::P2mKind::translated;
    uint64_t p2m_size = 0;           // pfns 0 … p2m_size-1 were examined (MAX_PFN=)
    std::vector<PageEntry> pages;    // present pages, strictly ascending pfn
    unsigned guest_width = 8;        // bytes; 8 for HVM/PVH
    // PV only: the shared_info page as read (4096 bytes) and the mfns of the
    // pages that hold the p2m itself (leaf pages, in p2m order; holes skipped).
    std::vector<std::byte> shared_info;
    std::vector<uint64_t> p2m_frames;
    std::vector<std::string> warnings;  // one line each, aggregated
};

// The largest p2m size discovery accepts for this domain: twice the pages
// the domain may own, plus 16 GiB of pfn space for holes (PCI/MMIO windows,
// hotplug ranges), at least 1 GiB of pfns.
uint64_t p2m_size_limit(const DomainInfo& info);

// Throws Error (object "domain N") when the p2m cannot be walked.
P2mMap discover_p2m(Hypervisor& hv, const DomainInfo& info, const P2mOptions& options = {});

}  // namespace xendump
