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

// The pass over `source`: batches read in order on one thread, worked on
// (classified, selected, `prepare`) on `threads` threads, delivered in pfn
// order on this one.
void pass(PageSource& source, const PageSelector* select, bool classify, bool positional, size_t per_batch,
          unsigned threads, const OrderedBatches::Stage& prepare, const OrderedBatches::Stage& deliver) {
    const uint64_t n = source.nr_entries();
    const size_t nr_batches = static_cast<size_t>((n + per_batch - 1) / per_batch);
    const unsigned workers = threads > 1 ? threads : 0;
    // With one thread the reader classifies right after reading (the pages
    // are still in its cache) while the caller works and delivers; with
    // more, workers classify, select and prepare in parallel.
    // A selector that decides by pfn selects as the batch is read, which
    // then reads (maps) only the pages kept.
    const PageSelector* early = select && select->by_pfn() ? select : nullptr;
    auto read = [&](PageBatch& b) {
        fill_batch(b, source, positional, early);
        if (classify && !workers) classify_zero_pages(b);
    };
    auto work = [&](PageBatch& b) {
        if (classify && workers) classify_zero_pages(b);
        if (select && !early) select->select(b);
        if (prepare) prepare(b);
    };
    OrderedBatches batches(nr_batches, workers, static_cast<size_t>(std::min<uint64_t>(per_batch, std::max<uint64_t>(n, 1))),
                           read, work);
    batches.run(deliver, static_cast<size_t>(n));
}

unsigned pass_threads(const WriteOptions& options) { return std::clamp(options.threads, 1u, kMaxWriteThreads); }

void check_cancel(const WriteOptions& options) {
    if (options.cancel && options.cancel->load()) throw Error("cancelled");
}

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
    const bool classify = encoder.needs_zero_flags(out) || (st.select && st.select->needs_zero_flags());
    const uint64_t planned = encoder.planned_size();

    auto deliver = [&](PageBatch& b) {
        check_cancel(options);
        for (size_t i = 0; i < b.count; ++i) {
            // A page left out is not in the file: not listed as unreadable either.
            if (b.unreadable[i] && b.keep[i]) result.pass.unreadable_pfns.push_back(b.pfn(i));
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
    pass(st.source, st.select, classify, out.positional(),
         batch_pages(st.source.preferred_batch(), encoder.batch_alignment()), pass_threads(options),
         [&](PageBatch& b) { encoder.prepare(b); }, deliver);
    for (PageObserver* o : st.observe) o->finish(result.found);
    encoder.finish(result.pass, result.found, out);
    out.finish();
    if (options.on_progress) {
        WriteProgress p;
        p.pages_done = p.pages_total = n;
        p.bytes_done = p.bytes_total = out.offset();  // planned_size() may have been a bound
        options.on_progress(p);
    }
    return result;
}

kernel::PfnBitmap selected_pfns(PageSource& source, const PageSelector& select, const WriteOptions& options) {
    kernel::PfnBitmap kept(end_pfn(source));
    auto keep = [&](PageBatch& b) {
        check_cancel(options);
        for (size_t i = 0; i < b.count; ++i)
            if (b.keep[i]) kept.set(b.pfn(i));
    };
    const size_t per_batch = batch_pages(source.preferred_batch(), 1);
    if (select.needs_zero_flags()) {
        pass(source, &select, true, false, per_batch, pass_threads(options), {}, keep);
        return kept;
    }
    // Decided by pfn alone: no page is read.
    PageBatch b;
    b.reserve(per_batch);
    for_each_entry_window(source, [&](uint64_t first, std::span<const PageEntry> window) {
        for (size_t at = 0; at < window.size(); at += b.count) {
            b.first = first + at;
            b.count = std::min(per_batch, window.size() - at);
            b.entries = window.subspan(at, b.count);
            std::fill_n(b.keep.begin(), b.count, 1);
            select.select(b);
            keep(b);
        }
    });
    return kept;
}

}  // namespace xendump::pipeline
