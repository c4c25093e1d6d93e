// The source stage: fills a batch from a PageSource, through the zero-copy
// paths when the source has them (zero_copy_source.hpp), else read_pages.
// Called from one thread at a time: sources are not thread-safe.
#pragma once

#include <functional>

#include "pipeline/page_batch.hpp"
#include "pipeline/selector.hpp"
#include "xendump/page_source.hpp"

namespace xendump::pipeline {

// Fills batch.page/unreadable for entries [batch.first, batch.first +
// batch.count). `positional`: the sink can take a FileRange (a seekable
// output). An unreadable page points at zeros afterwards (xen-dump-core(5) "Trailer notes"), whatever
// the source left; keep[] is reset to all pages. With `select` (a
// selector that decides by pfn alone, PageSelector::by_pfn), keep[] is its
// verdict instead, and only the kept pages are read: a page left out points
// at zeros and is neither read nor mapped.
void fill_batch(PageBatch& batch, PageSource& source, bool positional, const PageSelector* select = nullptr);

// The pages of `source` in order, through the zero-copy paths (a loan of
// the mapping, no copy) when the source has them: f(pfn, page) for each
// page that could be read, until f returns false. For scans before a pass
// (VMCOREINFO).
void scan_pages(PageSource& source, const std::function<bool(uint64_t, std::span<const std::byte>)>& f);

}  // namespace xendump::pipeline
