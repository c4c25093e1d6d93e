// Where each batch's bytes go in an output that stores batches one after
// the other, each as long as its prepare() made it (a compact file's page
// data: compressed pages), known on the workers that prepare the batches
// (pipeline/encoder.hpp: any thread, any order) rather than only when the
// batch is written. Batch k's place is batch k-1's place plus its size.
//
// Nobody waits for a place. A worker that has prepared batch k gives its
// size and what to do at its place (`then`); when batch k-1 is placed
// already, batch k is placed and `then` runs there and then, on that worker.
// Else batch k is kept, and the worker goes on to its next batch: the call
// that places batch k-1 then places batch k too and runs its `then`, on its
// own thread, before it returns (and so on for the batches kept after it).
// A worker that finished early no longer stands idle behind a slower one:
// with two workers compressing a real guest's pages, each waited about a
// tenth of the dump for the other (BENCHMARKS.md, #16b).
//
// So batch k's `then` has run before the place() that placed batch k - 1
// (or batch k's own) returned: a pipeline that delivers the batches in order
// once each one's prepare() has returned (ordered_batches.hpp) delivers batch
// k only after its `then` has run.
//
// A worker whose batch fails calls fail(): from then on nothing is placed
// and no `then` runs (the pass reports the batch's error).
//
// What it is for: an encrypted file's chunks sealed on the workers, where
// the batches were compressed (io::EncryptingOutput::seal_ahead needs the
// bytes' place), not on the one thread that writes the file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace xendump::pipeline {

class BatchPlaces {
public:
    using Then = std::function<void(uint64_t place)>;

    explicit BatchPlaces(std::string name) : name_(std::move(name)) {}

    // The first batch (entries from 0) goes at `offset`; forgets any earlier pass.
    void start(uint64_t offset);
    // The batch of entries [first, first + count) takes `size` bytes, and
    // `then` is run with its place once it has one (above). Returns whether
    // this call placed it. Never waits. A `then` that throws fails the pass
    // (fail()), and its error goes to this call's caller.
    bool place(uint64_t first, uint64_t count, uint64_t size, Then then);
    // A batch will never be placed (its work failed).
    void fail();

private:
    struct Kept {
        uint64_t count = 0, size = 0;
        Then then;
    };

    std::string name_;  // of the output, for errors
    std::mutex m_;
    std::map<uint64_t, Kept> kept_;  // by first entry: batches whose place waits for an earlier one
    uint64_t next_first_ = 0;        // the first entry of the batch to place next
    uint64_t next_at_ = 0;           // and its place
    bool failed_ = false;
};

}  // namespace xendump::pipeline
