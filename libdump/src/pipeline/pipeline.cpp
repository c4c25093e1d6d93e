#include "pipeline/pipeline.hpp"

#include <algorithm>

#include "kernel/pfn_runs.hpp"
#include "pipeline/batch_source.hpp"
#include "pipeline/ordered_batches.hpp"
#include "pipeline/zero_pages.hpp"
#include "xendump/error.hpp"

namespace xendump::pipeline {

namespace {

// The pass over `source`: batches read in order on one thread, worked on
// (classified, selected, `prepare`) by `plan.workers` threads, delivered in
// pfn order on this one.
void pass(PageSource& source, const PageSelector* select, bool classify, bool positional, const BatchPlan& plan,
          const OrderedBatches::Stage& prepare, const OrderedBatches::Stage& deliver) {
    const uint64_t n = source.nr_entries();
    const size_t nr_batches = static_cast<size_t>((n + plan.pages - 1) / plan.pages);
    const unsigned workers = plan.workers;
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
    OrderedBatches batches(nr_batches, workers, plan.in_flight,
                           static_cast<size_t>(std::min<uint64_t>(plan.pages, std::max<uint64_t>(n, 1))), read, work);
    batches.run(deliver, static_cast<size_t>(n));
}

void check_cancel(const WriteOptions& options) {
    if (options.cancel && options.cancel->load()) throw Error("cancelled");
}

}  // namespace

BatchPlan plan_batches(size_t preferred, size_t alignment, unsigned threads) {
    threads = std::clamp(threads, 1u, kMaxWriteThreads);
    BatchPlan plan;
    plan.pages = std::clamp(preferred, kMinBatchPages, kMaxBatchPages);
    if (threads == 1) {
        // The reader fills one batch while the caller works on the other.
        if (alignment > 1) plan.pages = std::max(alignment, plan.pages / alignment * alignment);
        plan.in_flight = 2;
        return plan;
    }
    // One batch being read, one being delivered, one per worker, and at
    // least kLookahead in all: batches take the workers unequal times (zero
    // pages, text, code), and a worker stops when every batch in flight
    // waits for a slower one before it to be delivered.
    const size_t wanted = std::max<size_t>(threads + 2, kLookahead);
    plan.pages = std::min(plan.pages, std::max(kMinBatchPages, kInFlightPages / wanted));
    if (alignment > 1) plan.pages = std::max(alignment, plan.pages / alignment * alignment);
    plan.in_flight = std::max<size_t>(3, kInFlightPages / plan.pages);
    plan.workers = static_cast<unsigned>(std::min<size_t>(threads, plan.in_flight - 2));
    return plan;
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

    out.ask_room(options.room, planned);
    encoder.begin(out);
    pass(st.source, st.select, classify, out.positional(),
         plan_batches(st.source.preferred_batch(), encoder.batch_alignment(), options.threads),
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
        kernel::set_runs(kept, b.count, [&](size_t i) { return b.pfn(i); }, [&](size_t i) { return b.keep[i] != 0; });
    };
    const BatchPlan plan = plan_batches(source.preferred_batch(), 1, options.threads);
    if (select.needs_zero_flags()) {
        pass(source, &select, true, false, plan, {}, keep);
        return kept;
    }
    const size_t per_batch = plan.pages;
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
