// Where each batch's bytes go in an output that stores batches one after
// the other, each as long as its prepare() made it (a compact file's page
// data: compressed pages), known on the workers that prepare the batches
// (pipeline/encoder.hpp: any thread, any order) rather than only when the
// batch is written. Batch k's place is batch k-1's place plus its size, so
// a worker that has prepared batch k waits in place() until batch k-1 has
// been placed; workers take batches in order (pipeline/ordered_batches.hpp)
// and each places its batch once its work is done, so the one waited for is
// always being worked on. A worker whose batch fails calls fail(): whoever
// waits, or comes later, gets no place instead of waiting for ever (and no
// error of its own: the pass reports the first batch's).
//
// What it is for: an encrypted file's chunks sealed on the worker, where
// the batch was compressed (io::EncryptingOutput::seal_ahead needs the
// bytes' place), not on the one thread that writes the file.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace xendump::pipeline {

class BatchPlaces {
public:
    explicit BatchPlaces(std::string name) : name_(std::move(name)) {}

    // The first batch (entries from 0) goes at `offset`; forgets any earlier pass.
    void start(uint64_t offset);
    // The batch of entries [first, first + count) takes `size` bytes:
    // returns its place once every batch before it has one; nothing when
    // one of them failed.
    std::optional<uint64_t> place(uint64_t first, uint64_t count, uint64_t size);
    // A batch will never be placed (its work failed).
    void fail();

private:
    std::string name_;  // of the output, for errors
    std::mutex m_;
    std::condition_variable placed_;
    uint64_t next_first_ = 0;  // the first entry of the batch to place next
    uint64_t next_at_ = 0;     // and its place
    bool failed_ = false;
};

}  // namespace xendump::pipeline
