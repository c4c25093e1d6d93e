// A PageSource over a live (or paused) guest: maps the guest's frames through
// the hypervisor interface in large batches. Frames the hypervisor refuses to
// map (ballooned out after discovery, not owned, ...) become unreadable pages.
#pragma once

#include <cstdint>
#include <vector>

#include "xendump/hypervisor.hpp"
#include "pipeline/zero_copy_source.hpp"

namespace xendump::dump {

class HypervisorPageSource final : public ZeroCopySource {
public:
    // `entries`: the discovered present pages, ascending pfn. PV guests are
    // mapped by gmfn (machine frame), HVM/PVH by pfn (gfn).
    HypervisorPageSource(Hypervisor& hv, uint32_t domid, std::vector<PageEntry> entries,
                         size_t batch_pages);

    std::span<const PageEntry> entries() const override { return entries_; }
    void read_pages(size_t first, size_t count, std::span<std::byte> out,
                    std::span<uint8_t> unreadable) override;
    size_t preferred_batch() const override { return batch_; }
    // One mapping call; the writer hashes and writes straight from it.
    std::unique_ptr<LentPages> lend_pages(size_t first, size_t count) override;

private:
    std::unique_ptr<ForeignMapping> map(size_t first, size_t count);

    Hypervisor& hv_;
    uint32_t domid_;
    std::vector<PageEntry> entries_;
    size_t batch_;
    std::vector<uint64_t> frames_;  // reused per call
};

}  // namespace xendump::dump
