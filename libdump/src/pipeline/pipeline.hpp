// One page pipeline for every writer of dumps:
//
//   source ──▶ select ──▶ observe ──▶ encode ──▶ sink
//
//   source   a PageSource (hypervisor, legacy file, xl file, v1 file), read
//            in batches by batch_source.hpp
//   select   selector.hpp: which of its pages are written (zero pages,
//            a set of pfns, dump levels: dump_level_selector.hpp)
//   observe  observer.hpp: sees every kept page once, in pfn order
//            (kernel_observer.hpp), and adds notes after the pass
//   encode   encoder.hpp: the file format (writer/v1_encoder.hpp, the
//            compact format's kdump/encoder.hpp)
//   sink     io/sink.hpp (file or pipe, holes, write-behind, rewrites at
//            known offsets), with the read-back and the atomic publication
//            around it (read_behind.hpp, io AtomicFile)
//
// Zero-page classification, selection and Encoder::prepare run on several
// threads when WriteOptions::threads > 1 (ordered_batches.hpp); observers
// and the encoder's writes always see the batches in pfn order, so the
// bytes written do not depend on the number of threads.
#pragma once

#include <vector>

#include "io/sink.hpp"
#include "pipeline/encoder.hpp"
#include "pipeline/observer.hpp"
#include "pipeline/selector.hpp"
#include "xendump/page_source.hpp"
#include "xendump/writer.hpp"

namespace xendump::pipeline {

struct Stages {
    PageSource& source;
    const PageSelector* select = nullptr;  // null: every page of the source
    std::vector<PageObserver*> observe;
    Encoder& encode;
};

struct Outcome {
    PassOutcome pass;
    FoundNotes found;
};

// Runs the whole pipeline into `out`: Encoder::begin, the page pass,
// observers' finish, Encoder::finish, Sink::finish. Uses `options`' threads,
// cancel and on_progress (the rest is the encoder's and the caller's).
Outcome run(const Stages& stages, io::Sink& out, const WriteOptions& options);

// The pfns of `source` that `select` keeps, a bit per pfn up to the last
// present one (a kernel::PfnBitmap: its memory does not grow with them), in a pass of their own that writes nothing (pages are read
// only when the selector looks at zero pages; the list of entries is read a
// window at a time): for a format that lays out its stored pages before the
// first one is written (the compact format's descriptor table). Uses
// `options`' threads and cancel. A pass with a PfnSetSelector of exactly
// these pages (PfnBitmapSet) then keeps them again, whatever the pages'
// contents by then.
kernel::PfnBitmap selected_pfns(PageSource& source, const PageSelector& select, const WriteOptions& options);

// The batches of a pass (issue 19): how many pages each holds, how many are
// in flight at once and how many worker threads work on them. Their pages
// stay within kInFlightPages whatever the number of threads: with workers
// the budget is used for batches in flight (at least kLookahead, so that a
// slow batch does not stop the workers behind it), more threads get more,
// smaller batches (down to kMinBatchPages, or the encoder's alignment), and
// past the budget the batches in flight (and the workers that could use
// them) stop growing. Each batch in flight holds its pages
// (read, or a source's mapping) and the encoder's work for them (compressed
// pages: at most as much again), so the pass's buffers stay under twice the
// budget, 64 MiB, from 1 to kMaxWriteThreads threads.
inline constexpr size_t kInFlightPages = 8192;  // 32 MiB of pages
inline constexpr size_t kMinBatchPages = 128;   // 512 KiB: a mapping call, a writev
inline constexpr size_t kMaxBatchPages = 1024;  // 4 MiB: still in the CPU's cache
inline constexpr size_t kLookahead = 16;        // batches in flight with 2 threads or more

struct BatchPlan {
    size_t pages = 0;      // per batch: a multiple of the alignment
    size_t in_flight = 0;  // batches at once: read, worked on, delivered
    unsigned workers = 0;  // 0: the reader and the caller's thread only
};

// The plan for a source preferring batches of `preferred` pages, an encoder
// whose batches start at multiples of `alignment` (Encoder::batch_alignment)
// and `threads` threads (clamped to 1..kMaxWriteThreads).
BatchPlan plan_batches(size_t preferred, size_t alignment, unsigned threads);

}  // namespace xendump::pipeline
