// The select stage for makedumpfile's dump levels (xendump/kernel/dump_level.hpp):
// the pages kernel::select_pages() keeps, decided per pfn from the guest's
// struct pages before the pass. Level bit 1 drops no page here: a compact
// file keeps every zero page as a descriptor of its one shared zero page, as
// makedumpfile's kdump files do (xen-dump-core(5)); a page left out of the
// second bitmap stops crash ("page excluded"), and the kernel needs some of
// its zero pages. So no page is read to select.
#pragma once

#include "pipeline/selector.hpp"
#include "xendump/kernel/dump_level.hpp"

namespace xendump::pipeline {

class DumpLevelSelector final : public PageSelector {
public:
    // `selection` (its `level` and `keep`) must outlive the selector.
    explicit DumpLevelSelector(const kernel::PageSelection& selection);

    bool needs_zero_flags() const override { return false; }
    bool by_pfn() const override { return true; }
    void select(PageBatch& batch) const override;

private:
    class Kept final : public PfnSet {
    public:
        explicit Kept(const kernel::PageSelection& s) : s_(s) {}
        bool contains(uint64_t pfn) const override { return s_.keep_pfn(pfn); }

    private:
        const kernel::PageSelection& s_;
    };

    Kept kept_;
    PfnSetSelector by_pfn_;
};

}  // namespace xendump::pipeline
