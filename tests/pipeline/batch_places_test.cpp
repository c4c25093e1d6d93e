// pipeline::BatchPlaces: the places of batches prepared on several threads
// in any order follow each other in batch order; a failed batch releases
// whoever waits for it.
#include "pipeline/batch_places.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "xendump/error.hpp"

namespace xendump::pipeline {
namespace {

constexpr uint64_t kPerBatch = 10;

uint64_t size_of(uint64_t k) { return k * 7 + 3; }

// Workers take batches in order (as OrderedBatches's do), take unequal times
// over them, and place each when done.
TEST(BatchPlaces, PlacesFollowEachOtherWhateverOrderTheWorkersFinishIn) {
    constexpr uint64_t kBatches = 200, kStart = 4096;
    BatchPlaces places("test");
    places.start(kStart);
    std::vector<uint64_t> got(kBatches);
    std::atomic<uint64_t> next{0};
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < 8; ++t)
        workers.emplace_back([&, t] {
            std::mt19937 random(t);
            for (uint64_t k; (k = next++) < kBatches;) {
                std::this_thread::sleep_for(std::chrono::microseconds(random() % 500));
                got[k] = places.place(k * kPerBatch, kPerBatch, size_of(k)).value();
            }
        });
    for (auto& w : workers) w.join();
    uint64_t at = kStart;
    for (uint64_t k = 0; k < kBatches; ++k) {
        EXPECT_EQ(got[k], at) << "batch " << k;
        at += size_of(k);
    }
}

TEST(BatchPlaces, AFailedBatchReleasesThoseWaitingForItWithoutAPlace) {
    BatchPlaces places("test");
    places.start(100);
    EXPECT_EQ(places.place(0, kPerBatch, 5), std::optional<uint64_t>(100));
    // Batch 1 is being worked on; batch 2 waits for it.
    auto waiting = std::async(std::launch::async, [&] { return places.place(2 * kPerBatch, kPerBatch, 1); });
    EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
    places.fail();  // batch 1 failed
    EXPECT_EQ(waiting.get(), std::nullopt);
    EXPECT_EQ(places.place(3 * kPerBatch, kPerBatch, 1), std::nullopt);
}

TEST(BatchPlaces, ABatchPlacedTwiceIsAnErrorAndStartBeginsAnotherPass) {
    BatchPlaces places("out.kdump");
    places.start(0);
    EXPECT_EQ(places.place(0, kPerBatch, 5), std::optional<uint64_t>(0));
    EXPECT_EQ(places.place(kPerBatch, 3, 6), std::optional<uint64_t>(5));
    try {
        places.place(0, kPerBatch, 5);
        ADD_FAILURE() << "placed twice";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("placed twice"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("out.kdump"), std::string::npos) << e.what();
    }
    places.fail();
    places.start(64);  // a new pass: no failure, from entry 0
    EXPECT_EQ(places.place(0, kPerBatch, 5), std::optional<uint64_t>(64));
}

}  // namespace
}  // namespace xendump::pipeline
