#include "pipeline/ordered_batches.hpp"

#include <algorithm>
#include <utility>

namespace xendump::pipeline {

OrderedBatches::OrderedBatches(size_t nr_batches, unsigned workers, size_t in_flight, size_t pages_per_batch,
                               Stage read, Stage work)
    : nr_batches_(nr_batches),
      per_batch_(pages_per_batch),
      read_(std::move(read)),
      work_(std::move(work)),
      slots_(std::max<size_t>(in_flight, workers ? 3 : 2)),
      nr_workers_(workers) {
    for (auto& s : slots_) s.batch.reserve(per_batch_);
}

OrderedBatches::~OrderedBatches() {
    stop(nullptr);
    for (auto& t : threads_) t.join();
}

template <class Pred>
bool OrderedBatches::wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Pred pred) {
    cv.wait(lock, [&] { return stop_ || pred(); });
    return !stop_;
}

void OrderedBatches::stop(std::exception_ptr e) {
    {
        std::lock_guard lock(m_);
        if (e && !error_) error_ = e;
        stop_ = true;
    }
    free_.notify_all();
    read_done_.notify_all();
    ready_.notify_all();
}

void OrderedBatches::reader(size_t total_pages) {
    try {
        for (size_t k = 0; k < nr_batches_; ++k) {
            Slot& s = slots_[k % slots_.size()];
            {
                std::unique_lock lock(m_);
                // No further ahead of the workers than read_lead() batches.
                const auto may_read = [&] {
                    return s.state == State::free && (nr_workers_ == 0 || k < next_work_ + read_lead());
                };
                reader_waits_ = !may_read();
                if (!wait(free_, lock, may_read)) return;
                reader_waits_ = false;
                s.state = State::reading;
                s.k = k;
            }
            s.batch.first = k * per_batch_;
            s.batch.count = std::min(per_batch_, total_pages - s.batch.first);
            read_(s.batch);
            {
                std::lock_guard lock(m_);
                s.state = State::read;
            }
            // A worker takes it, or without workers the caller.
            (nr_workers_ ? read_done_ : ready_).notify_one();
        }
    } catch (...) {
        stop(std::current_exception());
    }
}

void OrderedBatches::worker() {
    try {
        for (;;) {
            Slot* s = nullptr;
            bool last = false, more = false, reader = false;
            {
                std::unique_lock lock(m_);
                const auto next_read = [&] {
                    const Slot& c = slots_[next_work_ % slots_.size()];
                    return c.state == State::read && c.k == next_work_;
                };
                if (!wait(read_done_, lock, [&] { return next_work_ >= nr_batches_ || next_read(); })) return;
                if (next_work_ >= nr_batches_) return;
                s = &slots_[next_work_ % slots_.size()];
                s->state = State::working;
                ++next_work_;
                last = next_work_ == nr_batches_;
                more = !last && next_read();
                reader = reader_waits_;
            }
            if (reader) free_.notify_one();  // it may read one more now
            // The others have nothing left to take: they end. Else if the
            // next batch was read too (this worker may have taken the one
            // whose notification woke another), one is woken for it.
            if (last)
                read_done_.notify_all();
            else if (more)
                read_done_.notify_one();
            work_(s->batch);
            {
                std::lock_guard lock(m_);
                s->state = State::ready;
            }
            ready_.notify_one();  // the caller is the one waiter
        }
    } catch (...) {
        stop(std::current_exception());
    }
}

void OrderedBatches::run(const Stage& deliver, size_t total_pages) {
    if (nr_batches_ == 0) return;
    threads_.emplace_back([this, total_pages] { reader(total_pages); });
    for (unsigned i = 0; i < nr_workers_; ++i) threads_.emplace_back([this] { worker(); });
    const State wanted = nr_workers_ ? State::ready : State::read;
    try {
        for (size_t k = 0; k < nr_batches_; ++k) {
            Slot& s = slots_[k % slots_.size()];
            {
                std::unique_lock lock(m_);
                ready_.wait(lock, [&] { return stop_ || (s.k == k && s.state == wanted); });
                if (error_) std::rethrow_exception(error_);
                if (stop_) return;
            }
            if (!nr_workers_) work_(s.batch);
            deliver(s.batch);
            {
                std::lock_guard lock(m_);
                s.state = State::free;
            }
            free_.notify_one();  // the reader is the one waiter
        }
    } catch (...) {
        stop(std::current_exception());
        throw;
    }
}

}  // namespace xendump::pipeline
