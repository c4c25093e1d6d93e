// A PageSource over a live (or paused) guest: maps the guest's frames through
// the hypervisor interface in large batches. Frames the hypervisor refuses to
// map (ballooned out after discovery, not owned, ...) become unreadable pages.
#pragma once

#include <cstdint>
#include <vector>

#include "p2m/page_extents.hpp"
#include "pipeline/zero_copy_source.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump::dump {

class HypervisorPageSource final : public ZeroCopySource {
public:
    // `pages`: the discovered present pages, ascending pfn, as extents (32
    // bytes each, not 16 a page). PV guests are mapped by gmfn (machine
    // frame), HVM/PVH by pfn (gfn). `pages_change`: the guest runs while
    // its pages are read and nothing settles the file after the pass
    // (--live=inconsistent; a pre-copy's rounds and re-digest do): its
    // pages may change under a mapping, so the pass copies them
    // (loans_change).
    HypervisorPageSource(Hypervisor& hv, uint32_t domid, PageExtents pages, size_t batch_pages,
                         bool pages_change = false);

    uint64_t nr_entries() const override { return pages_.size(); }
    void read_entries(uint64_t first, std::span<PageEntry> out) const override { pages_.read(first, out); }
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const override { return pages_.index_of_pfn(pfn); }
    void read_pages(size_t first, size_t count, std::span<std::byte> out,
                    std::span<uint8_t> unreadable) override;
    size_t preferred_batch() const override { return batch_; }
    // One mapping call; the writer hashes and writes straight from it
    // (from a copy when pages_change).
    std::unique_ptr<LentPages> lend_pages(size_t first, size_t count) override;
    // One mapping call for the frames of `entries`.
    std::unique_ptr<LentPages> lend_entries(std::span<const PageEntry> entries) override;
    bool loans_change() const override { return pages_change_; }

private:
    std::unique_ptr<ForeignMapping> map(size_t first, size_t count);
    std::unique_ptr<ForeignMapping> map(std::span<const PageEntry> entries);

    Hypervisor& hv_;
    uint32_t domid_;
    PageExtents pages_;
    size_t batch_;
    bool pages_change_;
    std::vector<PageEntry> window_;  // reused per call
    std::vector<uint64_t> frames_;   // reused per call
};

}  // namespace xendump::dump
