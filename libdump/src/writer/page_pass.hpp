// The single pass over the guest's pages (xen-dump-core(5) "Page data", xen-dump-core(5) "Trailer notes"): reads batches from
// the page source (the next batch is read while the current one is hashed
// and written), hashes 256-page chunks with XXH3-128, shows every page to the
// observer, leaves zero pages as holes when the sink can, and collects the
// pages that could not be read.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <vector>

#include "io/sink.hpp"
#include "writer/plan.hpp"
#include "xendump/page_source.hpp"
#include "xendump/writer.hpp"

namespace xendump::writer {

struct PassResult {
    std::vector<uint64_t> unreadable_pfns;
    std::vector<XXH128_canonical_t> chunk_digests;  // empty without digests
};

PassResult write_pages(io::Sink& sink, PageSource& source, const DumpPlan& plan, const WriteOptions& options);

}  // namespace xendump::writer
