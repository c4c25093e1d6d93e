// The select stage: which of the source's pages are written. The source
// already leaves out holes (pfns the guest does not have); a selector drops
// more, page by page: from the page's contents (zero pages) or from a set of
// pfns worked out before the pass (makedumpfile's dump levels: free pages,
// page cache, user pages, from the guest's struct page flags).
//
// select() runs once per batch, on any of the pass's threads and with
// batches in any order, after the pass has read the batch and (when
// needs_zero_flags()) classified its zero pages: it must keep no state
// between calls. Observers and the encoder then see the kept pages only.
#pragma once

#include <cstdint>
#include <span>

#include "pipeline/page_batch.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/page_source.hpp"

namespace xendump::pipeline {

class PageSelector {
public:
    virtual ~PageSelector() = default;
    // True when select() reads batch.zero (the pass classifies first).
    virtual bool needs_zero_flags() const { return false; }
    // True when select() decides from the batch's pfns alone: the pass then
    // selects before reading and reads (maps) only the pages kept.
    virtual bool by_pfn() const { return false; }
    // Clears batch.keep[i] for every page not to be written.
    virtual void select(PageBatch& batch) const = 0;
};

// Drops pages whose bytes are all zeros (unreadable pages stay: they are
// listed as unreadable, not as zeros of the guest).
class ZeroPageSelector final : public PageSelector {
public:
    bool needs_zero_flags() const override { return true; }
    void select(PageBatch& batch) const override;
};

// A set of pfns decided before the pass, looked up per page; its storage
// (a bitmap in memory or in a file) is the implementation's.
class PfnSet {
public:
    virtual ~PfnSet() = default;
    virtual bool contains(uint64_t pfn) const = 0;  // called from several threads
};

// The pfns of a bitmap (not copied: it must outlive the set).
class PfnBitmapSet final : public PfnSet {
public:
    explicit PfnBitmapSet(const kernel::PfnBitmap& pfns) : pfns_(pfns) {}
    bool contains(uint64_t pfn) const override { return pfns_.test(pfn); }

private:
    const kernel::PfnBitmap& pfns_;
};

// Keeps the pages whose pfn is in the set.
class PfnSetSelector final : public PageSelector {
public:
    explicit PfnSetSelector(const PfnSet& keep) : keep_(keep) {}
    bool by_pfn() const override { return true; }
    void select(PageBatch& batch) const override;

private:
    const PfnSet& keep_;
};

}  // namespace xendump::pipeline
