// The shared queue: MaxParallel respected, order kept, cancel of queued and
// running jobs, stop() cancels everything.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "job_queue.hpp"

using namespace xendump::daemon;

namespace {

DumpRequest req(uint32_t domid) {
    DumpRequest r;
    r.domid = domid;
    return r;
}

// A fake dump that waits until released or cancelled.
struct Gate {
    std::atomic<int> running{0};
    std::atomic<int> max_running{0};
    std::atomic<bool> open{false};
    std::vector<uint32_t> order;
    std::mutex m;
    DumpJobResult run(Job& job) {
        int now = ++running;
        int seen = max_running;
        while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
        }
        {
            std::lock_guard lock(m);
            order.push_back(job.request.domid);
        }
        while (!open && !job.cancel) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        --running;
        DumpJobResult r;
        r.result = job.cancel ? DumpOutcome::cancelled : DumpOutcome::ok;
        return r;
    }
};

void wait_finished(JobQueue& q, Job& job) {
    while (q.state_of(job) != JobState::finished) q.wait_for_change(job, q.state_of(job), std::chrono::milliseconds(50));
}

}  // namespace

TEST(JobQueue, MaxParallelAndOrder) {
    for (unsigned max : {1u, 2u}) {
        Gate gate;
        std::atomic<int> finished{0};
        JobQueue q(max, [&](Job& j) { return gate.run(j); }, [&](Job&) { ++finished; });
        std::vector<std::shared_ptr<Job>> jobs;
        for (uint32_t d = 1; d <= 4; ++d) jobs.push_back(q.submit(req(d), "d"));
        while (gate.running < static_cast<int>(max)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_EQ(q.active(), 4u);
        gate.open = true;
        for (auto& j : jobs) wait_finished(q, *j);
        EXPECT_EQ(gate.max_running.load(), static_cast<int>(max));
        EXPECT_EQ(finished.load(), 4);
        if (max == 1) {
            EXPECT_EQ(gate.order, (std::vector<uint32_t>{1, 2, 3, 4}));
        }
        for (auto& j : jobs) EXPECT_EQ(j->result->result, DumpOutcome::ok);
    }
}

TEST(JobQueue, CancelQueuedAndRunning) {
    Gate gate;
    JobQueue q(1, [&](Job& j) { return gate.run(j); }, nullptr);
    auto a = q.submit(req(1), "a");
    auto b = q.submit(req(2), "b");
    while (gate.running < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(q.cancel(b->id));
    EXPECT_EQ(q.state_of(*b), JobState::finished);
    EXPECT_EQ(b->result->result, DumpOutcome::cancelled);
    auto snap = q.snapshot();
    ASSERT_EQ(snap.size(), 1u);
    EXPECT_EQ(snap[0].id, a->id);
    EXPECT_EQ(snap[0].state, JobState::running);
    EXPECT_TRUE(q.cancel(a->id));
    wait_finished(q, *a);
    EXPECT_EQ(a->result->result, DumpOutcome::cancelled);
    EXPECT_FALSE(q.cancel(12345));
    EXPECT_EQ(gate.order, (std::vector<uint32_t>{1}));
}

TEST(JobQueue, StopCancelsEverything) {
    Gate gate;
    JobQueue q(2, [&](Job& j) { return gate.run(j); }, nullptr);
    auto a = q.submit(req(1), "a");
    auto b = q.submit(req(2), "b");
    auto c = q.submit(req(3), "c");
    while (gate.running < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(q.stop(std::chrono::seconds(30)));
    for (auto& j : {a, b, c}) EXPECT_EQ(j->result->result, DumpOutcome::cancelled);
}

// Issue 16.6: requests from the control socket never make a crash wait:
// a crash dump submitted behind queued requests runs before them.
TEST(JobQueue, CrashDumpsGoBeforeQueuedRequests) {
    Gate gate;
    JobQueue q(1, [&](Job& j) { return gate.run(j); }, nullptr);
    std::vector<std::shared_ptr<Job>> jobs;
    jobs.push_back(q.submit(req(1), "request"));
    while (gate.running < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (uint32_t d = 2; d <= 4; ++d) jobs.push_back(q.submit(req(d), "request"));
    jobs.push_back(q.submit(req(5), "crash", CrashKey{5, "u5"}));
    jobs.push_back(q.submit(req(6), "crash", CrashKey{6, "u6"}));
    gate.open = true;
    for (auto& j : jobs) wait_finished(q, *j);
    EXPECT_EQ(gate.order, (std::vector<uint32_t>{1, 5, 6, 2, 3, 4}));
}

// A bookkeeping callback that throws is logged, not fatal to the worker.
TEST(JobQueue, FinishedCallbackErrorsAreSurvived) {
    Gate gate;
    gate.open = true;
    int calls = 0;
    JobQueue q(1, [&](Job& j) { return gate.run(j); }, [&](Job&) {
        ++calls;
        throw std::runtime_error("disk full");
    });
    auto a = q.submit(req(1), "a");
    wait_finished(q, *a);
    auto b = q.submit(req(2), "b");
    wait_finished(q, *b);
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(b->result->result, DumpOutcome::ok);
}
