// The encode stage: turns the page stream into a file format. The v1 ELF
// writer (writer/v1_encoder.hpp) is one encoder; a compressed format is
// another. The pass calls, on one output (io::Sink, written front to back,
// rewritable at known offsets when seekable):
//   begin()    once, before the first page: what precedes the pages (with
//              room for what is only known later, when the format needs it);
//   prepare()  once per batch, on any thread, batches in any order: work
//              that needs no other batch (digests, compression), kept in
//              batch.work;
//   write()    once per batch, in pfn order: the kept pages (batch.keep);
//   finish()   after the pass and the observers' finish(): what follows the
//              pages, and on a seekable output the head's final bytes
//              (io::Sink::write_at), with what the observers found.
#pragma once

#include <cstdint>
#include <vector>

#include "io/sink.hpp"
#include "pipeline/found_notes.hpp"
#include "pipeline/page_batch.hpp"

namespace xendump::pipeline {

// What the pass saw, for Encoder::finish.
struct PassOutcome {
    uint64_t pages_read = 0;              // every page of the source
    uint64_t pages_kept = 0;              // the selected ones
    std::vector<uint64_t> unreadable_pfns;  // of the kept pages
};

class Encoder {
public:
    virtual ~Encoder() = default;

    // Whether prepare()/write() read batch.zero (holes, digest short cuts):
    // the pass then classifies zero pages first.
    virtual bool needs_zero_flags(const io::Sink& out) const = 0;
    // Batches start at multiples of this many entries (digest chunks, format
    // blocks) so that prepare() never needs the batch before. 1: any.
    virtual size_t batch_alignment() const { return 1; }
    // The planned size of the file, for progress; 0 when not known ahead.
    virtual uint64_t planned_size() const { return 0; }

    virtual void begin(io::Sink& out) = 0;
    virtual void prepare(PageBatch& /*batch*/) const {}
    virtual void write(PageBatch& batch, io::Sink& out) = 0;
    virtual void finish(const PassOutcome& pass, const FoundNotes& found, io::Sink& out) = 0;
};

}  // namespace xendump::pipeline
