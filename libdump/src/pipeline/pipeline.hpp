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
// present one, in a pass of their own that writes nothing (pages are read
// only when the selector looks at zero pages; the list of entries is read a
// window at a time): for a format that lays out its stored pages before the
// first one is written (the compact format's descriptor table). Uses
// `options`' threads and cancel. A pass with a PfnSetSelector of exactly
// these pages (PfnBitmapSet) then keeps them again, whatever the pages'
// contents by then.
kernel::PfnBitmap selected_pfns(PageSource& source, const PageSelector& select, const WriteOptions& options);

// Pages per batch for a source preferring `preferred`, a multiple of
// `alignment` (Encoder::batch_alignment).
size_t batch_pages(size_t preferred, size_t alignment);

}  // namespace xendump::pipeline
