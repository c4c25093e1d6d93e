// pipeline::BatchPlaces: the places of batches prepared on several threads
// in any order follow each other in batch order; nobody waits for a place:
// a batch that comes before the one before it is placed, and its `then`
// run, by the call that places that one, before that call returns; a failed
// batch stops every later placing.
#include "pipeline/batch_places.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "xendump/error.hpp"

namespace xendump::pipeline {
namespace {

constexpr uint64_t kPerBatch = 10;

uint64_t size_of(uint64_t k) { return k * 7 + 3; }

// Workers take batches in order (as OrderedBatches's do), take unequal times
// over them, and place each when done. Every batch's `then` runs once, with
// its place, before the place() calls of it and of every batch before it
// have all returned (a pipeline delivers batch k only after their
// prepare()s have), whichever worker ran it.
TEST(BatchPlaces, PlacesFollowEachOtherWhateverOrderTheWorkersFinishIn) {
    constexpr uint64_t kBatches = 400, kStart = 4096;
    BatchPlaces places("test");
    places.start(kStart);
    std::vector<uint64_t> got(kBatches, 0);
    // When each batch's `then` ran and its place() returned (a sequence number; 0: not yet).
    std::vector<std::atomic<uint64_t>> ran(kBatches), returned(kBatches);
    std::atomic<uint64_t> clock{1}, next{0}, early{0};
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < 8; ++t)
        workers.emplace_back([&, t] {
            std::mt19937 random(t);
            for (uint64_t k; (k = next++) < kBatches;) {
                std::this_thread::sleep_for(std::chrono::microseconds(random() % 500));
                const bool here = places.place(k * kPerBatch, kPerBatch, size_of(k), [&, k](uint64_t at) {
                    got[k] = at;
                    EXPECT_EQ(ran[k].exchange(clock++), 0u) << "batch " << k << " placed twice";
                });
                // Placed here: its `then` has run (else it may run at any time now).
                if (here) {
                    EXPECT_NE(ran[k].load(), 0u) << "batch " << k;
                }
                returned[k] = clock++;
                early += !here;
            }
        });
    for (auto& w : workers) w.join();
    uint64_t at = kStart, last = 0;
    for (uint64_t k = 0; k < kBatches; ++k) {
        ASSERT_NE(ran[k].load(), 0u) << "batch " << k << " never placed";
        EXPECT_EQ(got[k], at) << "batch " << k;
        last = std::max(last, returned[k].load());
        EXPECT_LT(ran[k].load(), last) << "batch " << k;
        at += size_of(k);
    }
    // The workers did finish out of order (else this showed little).
    EXPECT_GT(early.load(), 0u);
}

TEST(BatchPlaces, ABatchBeforeItsTurnIsPlacedByTheCallThatPlacesTheOneBefore) {
    BatchPlaces places("test");
    places.start(100);
    std::vector<std::pair<uint64_t, std::thread::id>> ran;
    auto record = [&](uint64_t k) {
        return [&, k](uint64_t at) { ran.emplace_back(at * 1000 + k, std::this_thread::get_id()); };
    };
    // Batches 2 and 1 come first: kept, their callers not held.
    std::thread([&] { EXPECT_FALSE(places.place(2 * kPerBatch, kPerBatch, 1, record(2))); }).join();
    std::thread([&] { EXPECT_FALSE(places.place(1 * kPerBatch, kPerBatch, 4, record(1))); }).join();
    EXPECT_TRUE(ran.empty());
    // Batch 0 places all three, in order, on this thread.
    EXPECT_TRUE(places.place(0, kPerBatch, 5, record(0)));
    ASSERT_EQ(ran.size(), 3u);
    EXPECT_EQ(ran[0].first, 100u * 1000 + 0);
    EXPECT_EQ(ran[1].first, 105u * 1000 + 1);
    EXPECT_EQ(ran[2].first, 109u * 1000 + 2);
    for (const auto& r : ran) EXPECT_EQ(r.second, std::this_thread::get_id());
    // The next one is placed at once.
    EXPECT_TRUE(places.place(3 * kPerBatch, kPerBatch, 1, record(3)));
    ASSERT_EQ(ran.size(), 4u);
    EXPECT_EQ(ran[3].first, 110u * 1000 + 3);
}

TEST(BatchPlaces, AFailedBatchStopsEveryLaterPlacing) {
    BatchPlaces places("test");
    places.start(100);
    int runs = 0;
    auto count = [&](uint64_t) { ++runs; };
    EXPECT_TRUE(places.place(0, kPerBatch, 5, count));
    EXPECT_FALSE(places.place(2 * kPerBatch, kPerBatch, 1, count));  // kept: batch 1 is being worked on
    places.fail();                                                    // batch 1 failed
    EXPECT_FALSE(places.place(3 * kPerBatch, kPerBatch, 1, count));
    EXPECT_EQ(runs, 1);
}

TEST(BatchPlaces, AThenThatThrowsFailsThePassAndStopsTheBatchesAfterIt) {
    BatchPlaces places("test");
    places.start(0);
    int runs = 0;
    EXPECT_FALSE(places.place(2 * kPerBatch, kPerBatch, 1, [&](uint64_t) { ++runs; }));
    EXPECT_FALSE(places.place(1 * kPerBatch, kPerBatch, 1, [](uint64_t) { throw std::runtime_error("sealing"); }));
    EXPECT_THROW(places.place(0, kPerBatch, 1, [&](uint64_t) { ++runs; }), std::runtime_error);
    EXPECT_EQ(runs, 1);  // batch 0's; batch 2's never ran
    EXPECT_FALSE(places.place(3 * kPerBatch, kPerBatch, 1, [&](uint64_t) { ++runs; }));
    EXPECT_EQ(runs, 1);
}

TEST(BatchPlaces, ABatchPlacedTwiceIsAnErrorAndStartBeginsAnotherPass) {
    BatchPlaces places("out.kdump");
    places.start(0);
    std::vector<uint64_t> at;
    auto keep = [&](uint64_t a) { at.push_back(a); };
    EXPECT_TRUE(places.place(0, kPerBatch, 5, keep));
    EXPECT_TRUE(places.place(kPerBatch, 3, 6, keep));
    EXPECT_EQ(at, (std::vector<uint64_t>{0, 5}));
    for (uint64_t first : {uint64_t{0}, 3 * kPerBatch}) {
        if (first) {
            EXPECT_FALSE(places.place(first, kPerBatch, 1, keep));  // kept
        }
        try {
            places.place(first, kPerBatch, 5, keep);
            ADD_FAILURE() << "placed twice: " << first;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("placed twice"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("out.kdump"), std::string::npos) << e.what();
        }
    }
    places.fail();
    places.start(64);  // a new pass: no failure, nothing kept, from entry 0
    EXPECT_TRUE(places.place(0, kPerBatch, 5, keep));
    EXPECT_EQ(at.back(), 64u);
}

}  // namespace
}  // namespace xendump::pipeline
