// The source stage: fills a batch from a PageSource, through the zero-copy
// paths when the source has them (zero_copy_source.hpp), else read_pages.
// Called from one thread at a time: sources are not thread-safe.
#pragma once

#include "pipeline/page_batch.hpp"
#include "xendump/page_source.hpp"

namespace xendump::pipeline {

// Fills batch.page/unreadable for entries [batch.first, batch.first +
// batch.count). `positional`: the sink can take a FileRange (a seekable
// output). An unreadable page points at zeros afterwards (xen-dump-core(5) "Trailer notes"), whatever
// the source left; keep[] is reset to all pages.
void fill_batch(PageBatch& batch, PageSource& source, bool positional);

}  // namespace xendump::pipeline
