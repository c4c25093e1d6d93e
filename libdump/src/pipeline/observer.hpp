// The observe stage: sees every kept page once, in pfn order, on the pass's
// ordering thread (guest-kernel scanners; kernel_observer.hpp). After the
// last page, before the encoder finishes the file, each observer adds what
// it found to the notes the encoder then writes (found_notes.hpp).
#pragma once

#include "pipeline/found_notes.hpp"
#include "pipeline/page_batch.hpp"

namespace xendump::pipeline {

class PageObserver {
public:
    virtual ~PageObserver() = default;
    // The kept pages of one batch (batch.keep[i]); batches in pfn order.
    virtual void observe(const PageBatch& batch) = 0;
    // After the pass, before Encoder::finish.
    virtual void finish(FoundNotes& /*notes*/) {}
};

}  // namespace xendump::pipeline
