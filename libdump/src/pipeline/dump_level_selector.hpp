// The select stage for makedumpfile's dump levels (xendump/kernel/dump_level.hpp):
// the pages kernel::select_pages() keeps, decided per pfn from the guest's
// struct pages before the pass, and, under level bit 1, not the zero pages,
// decided per page from the bytes the pass read (the pass's own zero
// classification, so no page is scanned twice).
//
// Like ZeroPageSelector, an unreadable page is never dropped as a zero page
// (it is listed as unreadable, not a zero page of the guest); it is still
// dropped when its pfn's struct page excludes it.
#pragma once

#include "pipeline/selector.hpp"
#include "xendump/kernel/dump_level.hpp"

namespace xendump::pipeline {

class DumpLevelSelector final : public PageSelector {
public:
    // `selection` (its `level` and `keep`) must outlive the selector.
    explicit DumpLevelSelector(const kernel::PageSelection& selection);

    bool needs_zero_flags() const override { return drop_zero_; }
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
    ZeroPageSelector zeros_;
    bool drop_zero_;
};

}  // namespace xendump::pipeline
