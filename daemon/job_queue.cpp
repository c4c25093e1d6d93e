#include "job_queue.hpp"

#include <algorithm>
#include <system_error>

#include "journal_log.hpp"

namespace xendump::daemon {

std::string to_string(JobState s) {
    switch (s) {
        case JobState::queued: return "queued";
        case JobState::running: return "running";
        case JobState::finished: return "finished";
    }
    return "unknown";
}

JobQueue::JobQueue(unsigned max_parallel, std::function<DumpJobResult(Job&)> run, std::function<void(Job&)> finished)
    : run_(std::move(run)), finished_(std::move(finished)), max_parallel_(std::max(max_parallel, 1u)) {}

JobQueue::~JobQueue() { stop(std::chrono::hours(1)); }

std::shared_ptr<Job> JobQueue::submit(DumpRequest request, std::string domain_label, std::optional<CrashKey> crash) {
    auto job = std::make_shared<Job>();
    job->request = request;
    job->domain_label = std::move(domain_label);
    job->crash = std::move(crash);
    std::lock_guard lock(mutex_);
    job->id = next_id_++;
    pending_.push_back(job);
    grow_workers_unlocked();
    changed_.notify_all();
    return job;
}

void JobQueue::grow_workers_unlocked() {
    // Workers are created lazily, up to MaxParallel; they live until stop().
    // Without a thread to be had (a task limit), the jobs wait for the
    // workers there are, or for the next grow_workers().
    try {
        while (!stopping_ && workers_.size() < std::min<size_t>(max_parallel_, pending_.size() + running_.size()))
            workers_.emplace_back([this] { worker(); });
    } catch (const std::system_error& e) {
        log_message(LogLevel::error, std::string("cannot start a dump worker (") + std::to_string(workers_.size()) +
                                         " running): " + e.what());
    }
}

void JobQueue::grow_workers() {
    std::lock_guard lock(mutex_);
    grow_workers_unlocked();
}

void JobQueue::set_path(Job& job, const std::filesystem::path& path) {
    std::lock_guard lock(mutex_);
    job.path = path;
}

void JobQueue::set_max_parallel(unsigned n) {
    std::lock_guard lock(mutex_);
    max_parallel_ = std::max(n, 1u);
    grow_workers_unlocked();
    changed_.notify_all();
}

void JobQueue::worker() {
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [&] { return stopping_ || (!pending_.empty() && running_.size() < max_parallel_); });
        if (stopping_) return;
        // Crash dumps go first: requests (from the control socket) never
        // make a crash wait.
        auto pick = std::find_if(pending_.begin(), pending_.end(), [](const auto& j) { return j->crash.has_value(); });
        if (pick == pending_.end()) pick = pending_.begin();
        auto job = *pick;
        pending_.erase(pick);
        running_.push_back(job);
        job->state = JobState::running;
        changed_.notify_all();
        lock.unlock();
        DumpJobResult result;
        try {
            result = run_(*job);
        } catch (const std::exception& e) {
            result.result = DumpOutcome::failed;
            result.error = e.what();
        }
        // The finished callback (crash bookkeeping) runs before anyone can
        // see the job as finished.
        job->result = std::move(result);
        call_finished(*job);
        lock.lock();
        running_.erase(std::find(running_.begin(), running_.end(), job));
        finish_unlocked(*job);
    }
}

void JobQueue::call_finished(Job& job) {
    if (!finished_) return;
    try {
        finished_(job);
    } catch (const std::exception& e) {
        log_message(LogLevel::error, "job " + std::to_string(job.id) + ": bookkeeping failed: " + e.what());
    }
}

void JobQueue::finish_unlocked(Job& job) {
    if (job.result) job.path = job.result->path;
    job.state = JobState::finished;
    changed_.notify_all();
}

bool JobQueue::cancel(uint64_t id) {
    std::shared_ptr<Job> dropped;
    {
        std::lock_guard lock(mutex_);
        for (auto it = pending_.begin(); it != pending_.end(); ++it) {
            if ((*it)->id == id) {
                dropped = *it;
                pending_.erase(it);
                dropped->cancel = true;
                DumpJobResult r;
                r.result = DumpOutcome::cancelled;
                r.error = "cancelled before it started";
                dropped->result = std::move(r);
                break;
            }
        }
        if (!dropped) {
            for (auto& job : running_)
                if (job->id == id) {
                    job->cancel = true;
                    return true;
                }
            return false;
        }
    }
    call_finished(*dropped);
    std::lock_guard lock(mutex_);
    finish_unlocked(*dropped);
    return true;
}

void JobQueue::cancel_all() {
    std::vector<uint64_t> ids;
    {
        std::lock_guard lock(mutex_);
        for (auto& j : pending_) ids.push_back(j->id);
        for (auto& j : running_) ids.push_back(j->id);
    }
    for (auto id : ids) cancel(id);
}

std::vector<JobSnapshot> JobQueue::snapshot() const {
    std::lock_guard lock(mutex_);
    std::vector<JobSnapshot> out;
    auto add = [&](const Job& j) {
        out.push_back(JobSnapshot{j.id, j.state, j.request.domid, j.domain_label,
                                  std::string(format::to_string(j.request.reason)), j.bytes_done.load(),
                                  j.bytes_total.load(), j.path.string(), j.finding_pages.load(),
                                  j.pfns_done.load(), j.pfns_total.load(), j.live_round.load(),
                                  j.dirty_pages.load(), j.live_final.load()});
    };
    for (auto& j : running_) add(*j);
    for (auto& j : pending_) add(*j);
    return out;
}

void JobQueue::wait_for_change(const Job& job, JobState seen, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return job.state != seen; });
}

JobState JobQueue::state_of(const Job& job) const {
    std::lock_guard lock(mutex_);
    return job.state;
}

std::filesystem::path JobQueue::path_of(const Job& job) const {
    std::lock_guard lock(mutex_);
    return job.path;
}

size_t JobQueue::active() const {
    std::lock_guard lock(mutex_);
    return pending_.size() + running_.size();
}

bool JobQueue::stop(std::chrono::milliseconds bound) {
    cancel_all();
    std::vector<std::thread> workers;
    {
        std::unique_lock lock(mutex_);
        // Let running dumps notice their cancel flag and clean up (temporary
        // removed, domain unpaused), within the bound.
        changed_.wait_for(lock, bound, [&] { return running_.empty(); });
        stopping_ = true;
        changed_.notify_all();
        if (!running_.empty()) {
            for (auto& w : workers_) w.detach();
            workers_.clear();
            return false;
        }
        workers.swap(workers_);
    }
    for (auto& w : workers) w.join();
    return true;
}

}  // namespace xendump::daemon
