// Consistent live dumps by pre-copy (issue 35), as Xen 4.17's save code
// moves a running guest (tools/libs/guest/xg_sr_save.c, send_memory_live
// and suspend_and_send_dirty): log-dirty on before the first page is read;
// the writer's pass copies every page while the guest runs; rounds of CLEAN
// re-copy what the guest dirtied meanwhile, each page into its slot; when
// what is left fits the pause target (or the rounds run out, or stop
// shrinking), the guest is paused, the pages of the last CLEAN and of the
// FINAL one are copied with its vcpu state, and it runs again. Every page
// is then copied after its last write before the pause: the file is the
// guest at that one instant.
//
// The one difference from Xen's loop: Xen copies the last CLEAN's pages
// while the guest runs and pauses for what that copy let the guest dirty;
// here they are copied in the pause, whose length is then decided with the
// pages in hand (what the policy weighs is what will be copied).
//
// What changes under pre-copy (issue 35 item 4): the v1 layout (which pfns
// are present, their runs, a PV guest's frames in .xen_p2m) is decided at
// discovery, before the pass, and cannot change in place. A guest that
// balloons, changes its p2m or raises its highest gfn meanwhile no longer
// fits the file: a pfn given back would be a page of stale contents (or
// zeros listed unreadable), one taken back would be missing. So the layout
// is checked after every CLEAN while the guest runs (as early as it can be
// seen) and, for certain, under the pause after the FINAL one:
//  - every guest: the highest gfn (Hypervisor::maximum_gpfn) and the pages
//    it owns (tot_pages: ballooning changes it; Xen marks a gfn it
//    unpopulates clean, so no dirty bit tells of it) as at discovery;
//  - HVM/PVH: a dirty gfn the dump does not hold that is now populated (Xen
//    marks a gfn it populates dirty), and a held gfn that fails to map under
//    the pause and is no longer populated (else it is unreadable, as before);
//  - PV: the guest's p2m pages are its own pages, so their pfns' dirty bits
//    say which it rewrote: those p2m pages (and those of dirty pfns the dump
//    does not hold, or of held pfns that fail to map) are read again and
//    their entries compared with the dump's. Under the pause the p2m's
//    anchor in shared_info is compared, and its upper levels (the tree's
//    root and frame lists, or the linear list's page tables, 1/512 of the
//    p2m) walked again, unless the guest publishes p2m_generation (with the
//    linear list) and it is unchanged: the pause reads only the p2m pages
//    dirtied since the last CLEAN, whatever the guest's size.
// A change throws LayoutChanged: the pause (if any) ends at once, log-dirty
// goes off, the unfinished file is discarded, and the dumper starts over
// with a fresh discovery (kMaxLayoutRestarts times at most, then an Error),
// so that the file has the layout of the instant it shows: a pfn given back
// is a hole, one taken back is copied. LIVE_RESTARTS= records the restarts.
//
// Memory: one bitmap of a bit per pfn up to the guest's maximum (32 MiB per
// TiB of guest), and a mapping batch; for a PV guest, 16 bytes a p2m page
// (its frame and pfn: 1/256 byte a guest page).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "dump/device_model_dirty_log.hpp"
#include "dump/logdirty_record.hpp"
#include "p2m/p2m_recheck.hpp"
#include "writer/live_rounds.hpp"
#include "xendump/dumper.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump::dump {

// The policy (DumpOptions::Precopy): after a CLEAN found `dirty` pages,
// pause when copying them at `pages_per_sec`, plus `fixed_us` (what the
// pause costs besides the pages: its FINAL CLEAN and the vcpu state, as
// measured while the guest runs), fits max_pause, when
// `live_rounds` rounds of re-copying were made already (max_rounds), or
// when the dirty set did not shrink since the round before (the guest
// dirties as fast as it is copied: more rounds would not help).
enum class PrecopyStep { copy_live, pause };
struct PrecopyDecision {
    PrecopyStep step = PrecopyStep::pause;
    const char* why = "";  // "fits", "rounds", "not shrinking"
};
PrecopyDecision precopy_decision(const DumpOptions::Precopy& policy, unsigned live_rounds, uint64_t dirty,
                                 std::optional<uint64_t> previous_dirty, double pages_per_sec, double fixed_us = 0);

// The guest's memory layout is no longer the one discovery found: the file
// being written cannot show it. Not an Error (write_dump_file's handler
// re-throws an Error as an Error): the dumper catches it and starts over.
struct LayoutChanged {
    std::string why;
};

// Restarts of a pre-copy whose guest's layout changed, before the dump
// ends in an Error.
inline constexpr unsigned kMaxLayoutRestarts = 3;

// What discovery found that tells later whether the layout changed.
struct DiscoveredLayout {
    uint64_t tot_pages = 0;               // DomainInfo::tot_pages, read just before the walk
    std::optional<PvP2mShape> pv;         // PV: the p2m walked
    std::vector<std::byte> shared_info;   // PV: as the walk read it (the p2m's anchor)
    std::function<std::optional<uint64_t>(uint64_t)> frame_to_pfn;  // PV: the dump's frames back to pfns
};

class Precopy {
public:
    // Log-dirty on (LogDirtyGuard: off again on every path) before anything
    // is read; Error with the hypervisor's reason when it refuses. An HVM
    // guest's device model is told to log its writes too (its QMP socket,
    // device_model_dirty_log.hpp); Error when it refuses, and a warning
    // from run() when real Xen's HVM guest has no such socket. With
    // options.records, a record says log-dirty is on while it is
    // (logdirty_record.hpp); a record of this domain that a killed dumper
    // left is released first (a warning from run() says so).
    // `hv` reads the guest (cancellable), `real_hv` pauses and unpauses it.
    Precopy(Hypervisor& hv, Hypervisor& real_hv, uint32_t domid, const DumpOptions::Precopy& options);

    // After discovery: the layout the file is written with, and the
    // restarts made before this attempt (LiveStats::restarts, LIVE_RESTARTS=).
    void discovered(DiscoveredLayout layout, unsigned restarts);
    // Just before the pass: the copy rate is measured from here.
    void pass_begins();
    // The rounds (writer::LiveRounds), once the pass wrote every page:
    // `source` gives the slots (index_of_pfn) and frames of the pages.
    // `unreadable_in_pass`: the pages the pass could not read; they, and
    // those a round could not, are read again under the pause.
    writer::LiveFinal run(writer::SlotRewriter& slots, const PageSource& source,
                          std::span<const uint64_t> unreadable_in_pass, const std::vector<VcpuContext>& vcpus, bool pv, uint64_t shared_info_frame,
                          const std::function<void(const std::string&)>& on_warning,
                          const std::function<void(const WriteProgress&)>& on_progress);

    const LiveStats& stats() const { return stats_; }

private:
    void mark(uint64_t pfn) {
        if (pfn < pages_) bitmap_[pfn / 64] |= uint64_t{1} << (pfn % 64);
    }
    bool marked(uint64_t pfn) const { return pfn < pages_ && (bitmap_[pfn / 64] >> (pfn % 64)) & 1; }
    // Copies the pages whose bits are set; returns how many. A marked pfn
    // the dump does not hold is left out: check_marked found it harmless.
    uint64_t copy_marked(writer::SlotRewriter& slots, const PageSource& source, std::vector<uint64_t>& unreadable);

    // The layout checks (see the top of this file); each throws LayoutChanged.
    [[noreturn]] void changed(const std::string& why) const;
    // The highest gfn and the pages owned, as at discovery.
    void check_counts();
    // The pfns marked in the bitmap (a CLEAN's or FINAL's); `paused`: the
    // FINAL one, with a PV p2m's anchor and structure checked too.
    void check_marked(const PageSource& source, bool paused);
    // Held pages that did not map under the pause: given back, or unreadable.
    void check_failed(const PageSource& source, std::span<const uint64_t> failed);
    // PV: p2m pages read again and their entries compared with the dump's;
    // `defer`: the running guest's p2m pages that do not map are tried
    // again under the pause rather than taken for a change.
    void check_leaves(const PageSource& source, std::vector<uint64_t> leaves, bool defer);
    // HVM/PVH: whether each gfn is populated (its page type; mapped where
    // the hypervisor refuses types).
    std::vector<bool> populated(std::span<const uint64_t> gfns);

    Hypervisor& hv_;
    Hypervisor& real_hv_;
    uint32_t domid_;
    DumpOptions::Precopy options_;
    LogDirtyRecord record_;  // before logdirty_: removed after it is off
    LogDirtyGuard logdirty_;
    std::optional<DeviceModelDirtyLog> device_model_;  // after logdirty_: off before it
    std::string device_model_warning_;
    uint64_t max_gpfn_ = 0;           // the hypervisor's, at the start (a change restarts the dump)
    uint64_t pages_ = 0;              // pfns the bitmap covers: maximum gpfn + 1, at most p2m_size_limit()
    std::vector<uint64_t> bitmap_;    // a bit per pfn
    std::chrono::steady_clock::time_point pass_start_{};
    LiveStats stats_;
    std::optional<DiscoveredLayout> layout_;
    PvP2mAnchor anchor_;                                  // PV: shared_info's p2m fields at discovery
    std::vector<uint64_t> leaf_frames_;                   // PV: the p2m pages' frames (re-walked under the pause)
    std::vector<std::pair<uint64_t, uint64_t>> leaf_pfns_;  // PV: (pfn, p2m page) of the tracked ones
    std::vector<uint64_t> untracked_leaves_;              // PV: p2m pages whose pfn is unknown: read under the pause
    std::vector<uint64_t> deferred_leaves_;               // PV: p2m pages that did not map while the guest ran
};

}  // namespace xendump::dump
