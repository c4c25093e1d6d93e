// One queue for crash dumps and on-demand requests, at most MaxParallel
// running at once, in submission order except that crash dumps go before
// queued requests. Each job carries its own cancel flag
// (xen-dumpctl cancel, a requester hanging up, or shutdown) and progress.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "crash_book.hpp"
#include "dump_job.hpp"

namespace xendump::daemon {

enum class JobState { queued, running, finished };
std::string to_string(JobState s);

struct Job {
    uint64_t id = 0;
    DumpRequest request;
    std::string domain_label;          // name or id, for status
    std::optional<CrashKey> crash;     // set for crash dumps
    std::atomic<bool> cancel{false};
    std::atomic<uint64_t> bytes_done{0};
    std::atomic<uint64_t> bytes_total{0};
    // Before the page pass (WriteProgress::finding_pages): pfns examined of the p2m size.
    std::atomic<bool> finding_pages{false};
    std::atomic<uint64_t> pfns_done{0};
    std::atomic<uint64_t> pfns_total{0};
    // A live dump's pre-copy rounds (WriteProgress::live_round): 0 before.
    std::atomic<unsigned> live_round{0};
    std::atomic<uint64_t> dirty_pages{0};
    std::atomic<bool> live_final{false};
    // Guarded by the queue's mutex:
    JobState state = JobState::queued;
    std::filesystem::path path;
    std::optional<DumpJobResult> result;  // set by the worker before state becomes finished
};

struct JobSnapshot {
    uint64_t id;
    JobState state;
    uint32_t domid;
    std::string domain;
    std::string reason;
    uint64_t bytes_done, bytes_total;
    std::string path;
    bool finding_pages;  // running, before its page pass: pfns_done of pfns_total examined
    uint64_t pfns_done, pfns_total;
    unsigned live_round;  // a live dump's pre-copy: round, pages dirty, paused for the last round
    uint64_t dirty_pages;
    bool live_final;
};

class JobQueue {
public:
    // `run` does the dump (in a worker thread) and returns its result;
    // `finished` is then called in the same thread.
    JobQueue(unsigned max_parallel, std::function<DumpJobResult(Job&)> run,
             std::function<void(Job&)> finished);
    ~JobQueue();  // stop(): cancels everything and joins

    std::shared_ptr<Job> submit(DumpRequest request, std::string domain_label, std::optional<CrashKey> crash = {});
    void set_max_parallel(unsigned n);
    // Starts the workers that could not be started before (no thread to be had).
    void grow_workers();
    // Cancels a queued job at once, a running one through its flag.
    bool cancel(uint64_t id);
    void cancel_all();
    std::vector<JobSnapshot> snapshot() const;
    // Waits until `job` changed state or `timeout` passed.
    void wait_for_change(const Job& job, JobState seen, std::chrono::milliseconds timeout) const;
    JobState state_of(const Job& job) const;
    void set_path(Job& job, const std::filesystem::path& path);
    std::filesystem::path path_of(const Job& job) const;
    size_t active() const;  // queued + running
    // Cancels everything and joins the workers, waiting at most `bound`;
    // returns false when a worker is still busy after it.
    bool stop(std::chrono::milliseconds bound);

private:
    void worker();
    void finish_unlocked(Job& job);
    void call_finished(Job& job);  // `finished`, its errors logged
    void grow_workers_unlocked();

    std::function<DumpJobResult(Job&)> run_;
    std::function<void(Job&)> finished_;
    mutable std::mutex mutex_;
    mutable std::condition_variable changed_;
    std::deque<std::shared_ptr<Job>> pending_;
    std::vector<std::shared_ptr<Job>> running_;
    std::vector<std::thread> workers_;
    unsigned max_parallel_;
    uint64_t next_id_ = 1;
    bool stopping_ = false;
};

}  // namespace xendump::daemon
