// Zero pages: what the pass classifies before selection and encoding (a
// selector may drop them, the v1 encoder leaves them as holes and takes a
// whole chunk of them as the digest of zeros without hashing it).
#pragma once

#include <cstddef>

#include "pipeline/page_batch.hpp"

namespace xendump::pipeline {

// 4096 zero bytes, for unreadable pages (stored as zeros, xen-dump-core(5) "Trailer notes").
const std::byte* zero_page();

bool is_zero_page(const std::byte* page);

// zero[i] for every page of the batch: unreadable pages count as zero, a page
// already left out (keep[i] == 0, fill_batch's by-pfn selection) as not zero.
void classify_zero_pages(PageBatch& batch);

}  // namespace xendump::pipeline
