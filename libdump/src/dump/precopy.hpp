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
// Memory: one bitmap of a bit per pfn up to the guest's maximum (32 MiB per
// TiB of guest), and a mapping batch.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "dump/device_model_dirty_log.hpp"
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

class Precopy {
public:
    // Log-dirty on (LogDirtyGuard: off again on every path) before anything
    // is read; Error with the hypervisor's reason when it refuses. An HVM
    // guest's device model is told to log its writes too (its QMP socket,
    // device_model_dirty_log.hpp); Error when it refuses, and a warning
    // from run() when real Xen's HVM guest has no such socket.
    // `hv` reads the guest (cancellable), `real_hv` pauses and unpauses it.
    Precopy(Hypervisor& hv, Hypervisor& real_hv, uint32_t domid, const DumpOptions::Precopy& options);

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
    // Copies the pages whose bits are set; returns how many.
    uint64_t copy_marked(writer::SlotRewriter& slots, const PageSource& source, std::vector<uint64_t>& unreadable);

    Hypervisor& hv_;
    Hypervisor& real_hv_;
    uint32_t domid_;
    DumpOptions::Precopy options_;
    LogDirtyGuard logdirty_;
    std::optional<DeviceModelDirtyLog> device_model_;  // after logdirty_: off before it
    std::string device_model_warning_;
    uint64_t pages_ = 0;              // pfns the bitmap covers: maximum gpfn + 1
    std::vector<uint64_t> bitmap_;    // a bit per pfn
    std::chrono::steady_clock::time_point pass_start_{};
    LiveStats stats_;
};

}  // namespace xendump::dump
