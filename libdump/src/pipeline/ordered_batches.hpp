// The pass's threads, with a fixed output order. Batch k (k = 0 .. n-1) is
// read on one reader thread in order (sources are not thread-safe), worked
// on (classified, selected, prepared) by `workers` threads in any order, and
// delivered to the calling thread strictly in order of k. Only `in_flight`
// batches exist (at most workers + 2 are of use: one read, one delivered,
// one per worker), reused round robin: memory does not grow with the guest
// nor with the workers (pipeline.hpp's plan_batches sizes them).
//
// With workers == 0 the work runs on the calling thread just before its
// delivery: the reader fills the next batch while the caller works on and
// delivers the current one (double buffering).
//
// The reader stays at most read_lead() batches ahead of the batches the
// workers have taken: when the work is what takes the time (an encrypted
// file's pages hashed and sealed), a batch is worked on soon after it was
// read, its pages still in the CPU's cache, rather than after every slot
// has been filled ahead of it.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "pipeline/page_batch.hpp"

namespace xendump::pipeline {

class OrderedBatches {
public:
    using Stage = std::function<void(PageBatch&)>;
    // read(b) gets b.first/b.count set; `pages_per_batch` sizes the batches.
    // `in_flight`: at least 2, and 3 with workers.
    OrderedBatches(size_t nr_batches, unsigned workers, size_t in_flight, size_t pages_per_batch, Stage read,
                   Stage work);
    ~OrderedBatches();  // stops and joins every thread
    OrderedBatches(const OrderedBatches&) = delete;
    OrderedBatches& operator=(const OrderedBatches&) = delete;

    // Calls deliver(batch) for every batch in order, on this thread. Rethrows
    // the first error of any stage; a throwing deliver stops the others.
    void run(const Stage& deliver, size_t total_pages);

private:
    enum class State { free, reading, read, working, ready };
    struct Slot {
        PageBatch batch;
        State state = State::free;
        size_t k = 0;
    };

    void reader(size_t total_pages);
    void worker();
    template <class Pred>
    bool wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Pred pred);  // false when stopped
    void stop(std::exception_ptr e);  // stop_ (and the first error), every waiter woken
    size_t read_lead() const { return std::max<size_t>(2, nr_workers_); }

    size_t nr_batches_;
    size_t per_batch_;
    Stage read_, work_;
    std::vector<Slot> slots_;
    std::mutex m_;
    // One per kind of waiter, so that a change wakes only who can use it
    // (64 workers are not all woken per batch): the reader waits for a free
    // slot, workers for a read batch, the caller for the next batch in order.
    std::condition_variable free_, read_done_, ready_;
    size_t next_work_ = 0;
    bool reader_waits_ = false;  // for a free slot or for the workers to take a batch
    bool stop_ = false;
    std::exception_ptr error_;
    unsigned nr_workers_;
    std::vector<std::thread> threads_;  // last: started in run()
};

}  // namespace xendump::pipeline
