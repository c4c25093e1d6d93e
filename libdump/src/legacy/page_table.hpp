// The page list of a decided legacy layout (which pfn and gmfn each stored
// page holds, and its slot in the file), in ascending pfn, as runs: entries
// whose pfn, gmfn and slot all rise by one share one 32-byte record. The
// runs go to a RecordFile (on disk past 1 MiB), and 16 bytes per 2048 runs
// stay in memory to find them: a dump in slot order is a few runs, a
// page-list dump one per extent of frames it moved (at worst one a page, on
// disk).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "legacy/spill.hpp"
#include "xendump/page_source.hpp"

namespace xendump::legacy {

class PageTable {
public:
    struct Run {
        uint64_t entry, pfn, gmfn, slot;  // first entry; its count runs to the next run's entry
    };

    // Entries added in strictly ascending pfn.
    class Builder {
    public:
        void add(uint64_t pfn, uint64_t gmfn, uint64_t slot);
        std::shared_ptr<const PageTable> finish();

    private:
        std::shared_ptr<PageTable> t_ = std::make_shared<PageTable>();
        Run open_{};
        uint64_t len_ = 0;
    };

    uint64_t size() const { return entries_; }
    uint64_t nr_runs() const { return runs_.size(); }
    // Entries [first, first + out.size()); slots too when `slots` is not empty.
    void read(uint64_t first, std::span<PageEntry> out, std::span<uint64_t> slots = {}) const;
    PageEntry entry(uint64_t i) const;
    uint64_t slot(uint64_t i) const;
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const;
    // f(entry, pfn, gmfn, slot, count) for each piece of a run within [first, first + count).
    template <class F>
    void for_each_run(uint64_t first, uint64_t count, F&& f) const;

private:
    static constexpr uint64_t kBlock = 2048;  // runs per fence
    // The runs of block `b` (cached; the lock is held by the caller).
    const std::vector<Run>& block(uint64_t b) const;
    uint64_t block_of_entry(uint64_t i) const;
    uint64_t run_end(const std::vector<Run>& blk, size_t k, uint64_t b) const;

    RecordFile<Run> runs_;
    std::vector<Run> fences_;  // first run of every kBlock (entry and pfn)
    uint64_t entries_ = 0;
    mutable std::mutex mutex_;
    mutable std::vector<Run> block_;
    mutable uint64_t block_no_ = UINT64_MAX;
};

template <class F>
void PageTable::for_each_run(uint64_t first, uint64_t count, F&& f) const {
    std::lock_guard lock(mutex_);
    const uint64_t end = first + count;
    uint64_t at = first;
    while (at < end) {
        const uint64_t b = block_of_entry(at);
        const std::vector<Run>& blk = block(b);
        auto r = std::upper_bound(blk.begin(), blk.end(), at, [](uint64_t e, const Run& x) { return e < x.entry; });
        for (size_t k = static_cast<size_t>(r - blk.begin()) - 1; k < blk.size() && at < end; ++k) {
            const Run& run = blk[k];
            const uint64_t stop = std::min(end, run_end(blk, k, b));
            const uint64_t d = at - run.entry;
            f(at, run.pfn + d, run.gmfn + d, run.slot + d, stop - at);
            at = stop;
        }
    }
}

}  // namespace xendump::legacy
