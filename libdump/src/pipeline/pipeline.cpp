#include "pipeline/pipeline.hpp"

#include <algorithm>

#include "pipeline/batch_source.hpp"
#include "pipeline/ordered_batches.hpp"
#include "pipeline/zero_pages.hpp"
#include "xendump/error.hpp"

namespace xendump::pipeline {

namespace {

// Small enough that a batch is still in the CPU cache when it is hashed and
// written, and that the batches in flight stay far below the memory bound
// (issue 7: 64 MiB + 24 B per guest page); large enough to keep syscalls
// cheap.
constexpr size_t kMinBatch = 256;   // 1 MiB
constexpr size_t kMaxBatch = 1024;  // 4 MiB, threads + 2 of them in flight

}  // namespace

size_t batch_pages(size_t preferred, size_t alignment) {
    size_t n = std::clamp(preferred, kMinBatch, kMaxBatch);
    if (alignment > 1) n = std::max(alignment, n / alignment * alignment);
    return n;
}

Outcome run(const Stages& st, io::Sink& out, const WriteOptions& options) {
    const uint64_t n = st.source.nr_entries();
    Encoder& encoder = st.encode;
    Outcome result;
    result.pass.pages_read = n;

    const size_t per_batch = batch_pages(st.source.preferred_batch(), encoder.batch_alignment());
    const size_t nr_batches = static_cast<size_t>((n + per_batch - 1) / per_batch);
    const unsigned threads = std::clamp(options.threads, 1u, kMaxWriteThreads);
    const unsigned workers = threads > 1 ? threads : 0;
    const bool classify = encoder.needs_zero_flags(out) || (st.select && st.select->needs_zero_flags());
    const bool positional = out.positional();
    const uint64_t planned = encoder.planned_size();

    // With one thread the reader classifies right after reading (the pages
    // are still in its cache) while the caller prepares and writes; with
    // more, workers classify, select and prepare in parallel.
    auto read = [&](PageBatch& b) {
        fill_batch(b, st.source, positional);
        if (classify && !workers) classify_zero_pages(b);
    };
    auto work = [&](PageBatch& b) {
        if (classify && workers) classify_zero_pages(b);
        if (st.select) st.select->select(b);
        encoder.prepare(b);
    };
    auto deliver = [&](PageBatch& b) {
        if (options.cancel && options.cancel->load()) throw Error("cancelled");
        for (size_t i = 0; i < b.count; ++i) {
            if (b.unreadable[i]) result.pass.unreadable_pfns.push_back(b.pfn(i));
            result.pass.pages_kept += b.keep[i];
        }
        for (PageObserver* o : st.observe) o->observe(b);
        encoder.write(b, out);
        b.lent.reset();  // the mapping goes as soon as its pages are written
        if (options.on_progress) {
            WriteProgress p;
            p.pages_done = b.first + b.count;
            p.pages_total = n;
            p.bytes_done = out.offset();
            p.bytes_total = planned;
            options.on_progress(p);
        }
    };

    encoder.begin(out);
    {
        OrderedBatches batches(nr_batches, workers, static_cast<size_t>(std::min<uint64_t>(per_batch, std::max<uint64_t>(n, 1))),
                               read, work);
        batches.run(deliver, static_cast<size_t>(n));
    }
    for (PageObserver* o : st.observe) o->finish(result.found);
    encoder.finish(result.pass, result.found, out);
    out.finish();
    if (options.on_progress) {
        WriteProgress p;
        p.pages_done = p.pages_total = n;
        p.bytes_done = out.offset();
        p.bytes_total = planned ? planned : out.offset();
        options.on_progress(p);
    }
    return result;
}

}  // namespace xendump::pipeline
