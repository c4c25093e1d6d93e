#include "io/encrypting_output.hpp"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "xendump/error.hpp"
#include "xendump/writer.hpp"

namespace xendump::io {

namespace {
constexpr uint64_t kChunk = age::kChunkSize;

const uint8_t* zero_chunk() {
    static const std::vector<uint8_t> zeros(kChunk);
    return zeros.data();
}
}  // namespace

// Chunks sealed on worker threads, written in the order given (see the
// header). The caller's thread owns the order: it gives the chunks, writes
// each job once sealed, and seals one itself rather than wait idle. A job is
// a run of up to kChunksPerJob consecutive chunks (the stream's are): one
// wake-up of a worker and one write for all of them, as they lie side by
// side in the file too.
class EncryptingOutput::SealPool {
public:
    static constexpr size_t kChunksPerJob = 4;
    static_assert(kSealSlotsPerThread % kChunksPerJob == 0);

    SealPool(age::Encryptor& enc, const Emit& emit, unsigned threads)
        : enc_(enc), emit_(emit), slots_(size_t{threads} * kSealSlotsPerThread / kChunksPerJob) {
        for (Job& j : slots_) free_.push_back(&j);
        for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
    }
    ~SealPool() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        work_cv_.notify_all();
        for (std::thread& t : workers_) t.join();
    }
    SealPool(const SealPool&) = delete;
    SealPool& operator=(const SealPool&) = delete;

    size_t chunks() const noexcept { return slots_.size() * kChunksPerJob; }

    // Seals chunk `index` (from a copy of `plain`), to be written at `at`
    // after every chunk given before it.
    void submit(uint64_t index, uint64_t at, std::span<const uint8_t> plain, bool last) {
        std::unique_lock lock(mutex_);
        if (open_ && !(index == open_->index + open_->count && open_->count < kChunksPerJob)) dispatch(lock);
        if (!open_) {
            while (free_.empty()) retire_oldest(lock);
            open_ = free_.back();
            free_.pop_back();
            open_->index = index;
            open_->at = at;
            open_->count = 0;
            open_->bytes = 0;
            open_->last = false;
        }
        Job* j = open_;
        lock.unlock();
        std::memcpy(j->plain.bytes().data() + j->count * kChunk, plain.data(), plain.size());
        j->sizes[j->count++] = plain.size();
        j->bytes += plain.size() + age::kTagSize;
        j->last = last;
        lock.lock();
        // Nothing follows the last chunk; a full job goes at once.
        if (last || j->count == kChunksPerJob) dispatch(lock);
        // Write what is sealed already, without waiting for the rest.
        while (!order_.empty() && order_.front()->state == Job::done) retire_oldest(lock);
    }

    // Writes every chunk given.
    void drain() {
        std::unique_lock lock(mutex_);
        if (open_) dispatch(lock);
        while (!order_.empty()) retire_oldest(lock);
    }

private:
    struct Job {
        enum State { idle, queued, running, done };
        uint64_t index = 0, at = 0, bytes = 0;  // the first chunk, where it goes, the sealed bytes
        size_t count = 0;
        std::array<size_t, kChunksPerJob> sizes{};
        bool last = false;  // its last chunk is the file's
        State state = idle;
        std::exception_ptr error;
        age::SecretBuffer plain{kChunksPerJob * kChunk};
        age::Bytes sealed = age::Bytes(kChunksPerJob * age::kSealedChunkSize);
    };

    // The job being filled goes to the workers.
    void dispatch(std::unique_lock<std::mutex>&) {
        open_->state = Job::queued;
        queue_.push_back(open_);
        order_.push_back(open_);
        open_ = nullptr;
        work_cv_.notify_one();
    }

    void seal(Job& j) noexcept {
        try {
            for (size_t k = 0; k < j.count; ++k)
                enc_.seal(j.index + k, std::span(j.plain.bytes().data() + k * kChunk, j.sizes[k]),
                          j.last && k + 1 == j.count,
                          std::span(j.sealed.data() + k * age::kSealedChunkSize, j.sizes[k] + age::kTagSize));
        } catch (...) {
            j.error = std::current_exception();
        }
    }

    // Takes a queued job and seals it (on the calling thread).
    void run_one(std::unique_lock<std::mutex>& lock) {
        Job* q = queue_.front();
        queue_.pop_front();
        q->state = Job::running;
        lock.unlock();
        seal(*q);
        lock.lock();
        q->state = Job::done;
        if (waiting_) done_cv_.notify_one();
    }

    void work() {
        std::unique_lock lock(mutex_);
        for (;;) {
            work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
            if (stop_) return;
            run_one(lock);
        }
    }

    // Writes the oldest job given, once sealed (sealing a queued one
    // meanwhile instead of waiting), and frees its slot.
    void retire_oldest(std::unique_lock<std::mutex>& lock) {
        Job* j = order_.front();
        while (j->state != Job::done) {
            if (!queue_.empty()) {
                run_one(lock);
            } else {
                waiting_ = true;
                done_cv_.wait(lock);
                waiting_ = false;
            }
        }
        order_.pop_front();
        const std::exception_ptr error = std::exchange(j->error, nullptr);
        lock.unlock();
        if (!error) {
            try {
                // The job's chunks lie side by side in the file: one write.
                emit_(j->at, std::span<const uint8_t>(j->sealed.data(), j->bytes));
            } catch (...) {
                lock.lock();
                j->state = Job::idle;
                free_.push_back(j);
                throw;
            }
        }
        lock.lock();
        j->state = Job::idle;
        free_.push_back(j);
        if (error) std::rethrow_exception(error);
    }

    age::Encryptor& enc_;
    const Emit& emit_;
    std::vector<Job> slots_;
    std::mutex mutex_;
    std::condition_variable work_cv_, done_cv_;
    std::vector<Job*> free_;
    Job* open_ = nullptr;     // being filled by the caller
    std::deque<Job*> queue_;  // given, not taken by a thread yet
    std::deque<Job*> order_;  // given, not written yet, in the order given
    bool waiting_ = false;    // the caller waits for a job to be done
    bool stop_ = false;
    std::vector<std::thread> workers_;
};

EncryptingOutput::EncryptingOutput(std::span<const age::Recipient> recipients, Emit emit, std::string name,
                                   unsigned threads)
    : enc_(recipients), emit_(std::move(emit)), name_(std::move(name)), sealed_buf_(age::kSealedChunkSize) {
    threads = std::min(threads, kMaxWriteThreads);
    if (threads > 1) pool_ = std::make_unique<SealPool>(enc_, emit_, threads);
}

// The pool's threads go first: they use enc_ and emit_.
EncryptingOutput::~EncryptingOutput() { pool_.reset(); }

size_t EncryptingOutput::seal_slots() const noexcept { return pool_ ? pool_->chunks() : 0; }

void EncryptingOutput::begin() { emit_(0, enc_.head()); }

uint64_t EncryptingOutput::file_offset(uint64_t plain) const noexcept {
    return enc_.chunk_offset(plain / kChunk) + plain % kChunk;
}

EncryptingOutput::Pending& EncryptingOutput::pending(uint64_t index, uint64_t at) {
    if (sealed(index))
        throw Error("internal error: writing into chunk " + std::to_string(index) +
                        " of the encrypted file, sealed already (a chunk is sealed once: its nonce is used once)",
                    name_, at);
    auto [it, added] = pending_.try_emplace(index);
    if (added) peak_ = std::max(peak_, pending_.size());
    return it->second;
}

bool EncryptingOutput::held(uint64_t index) const {
    const uint64_t b = index * kChunk, e = b + kChunk;
    return std::any_of(holds_.begin(), holds_.end(), [&](const auto& h) { return h.first < e && b < h.second; });
}

void EncryptingOutput::seal(uint64_t index, std::span<const uint8_t> plain, bool last) {
    if (index >= sealed_.size()) sealed_.resize(std::max<uint64_t>(index + 1, sealed_.size() * 2));
    sealed_[index] = true;
    if (pool_) {
        pool_->submit(index, enc_.chunk_offset(index), plain, last);
        return;
    }
    const std::span<uint8_t> out(sealed_buf_.data(), plain.size() + age::kTagSize);
    enc_.seal(index, plain, last, out);
    emit_(enc_.chunk_offset(index), out);
}

// A chunk is sealed (not as the last) once its 64 KiB are final, no hold
// covers it and something lies past it.
void EncryptingOutput::try_seal(uint64_t index) {
    auto it = pending_.find(index);
    if (it == pending_.end() || it->second.final_bytes != kChunk) return;
    if (extent_ <= (index + 1) * kChunk || held(index)) return;
    seal(index, it->second.plain.bytes(), false);
    pending_.erase(it);
}

void EncryptingOutput::grow_extent(uint64_t end) {
    if (end <= extent_) return;
    const uint64_t before = extent_;
    extent_ = end;
    // The chunk that ended the file so far is not the last any more.
    if (before > 0) try_seal((before - 1) / kChunk);
}

void EncryptingOutput::put(uint64_t offset, const std::byte* data, uint64_t n) {
    if (finished_) throw Error("internal error: writing after the end of the encrypted file", name_, offset);
    if (n == 0) return;
    grow_extent(offset + n);
    const auto* src = reinterpret_cast<const uint8_t*>(data);
    uint64_t at = offset;
    while (at < offset + n) {
        const uint64_t index = at / kChunk, in = at % kChunk;
        const uint64_t len = std::min(kChunk - in, offset + n - at);
        const uint8_t* from = src ? src + (at - offset) : nullptr;
        if (len == kChunk && !pending_.count(index) && extent_ > (index + 1) * kChunk && !held(index)) {
            // A whole chunk at once: sealed from the caller's bytes.
            if (sealed(index)) pending(index, at);  // throws
            seal(index, std::span(from ? from : zero_chunk(), kChunk), false);
        } else {
            Pending& p = pending(index, at);
            uint8_t* to = p.plain.bytes().data() + in;
            if (from)
                std::memcpy(to, from, len);
            else
                std::memset(to, 0, len);
            p.final_bytes += len;
            try_seal(index);
        }
        at += len;
    }
}

void EncryptingOutput::reserve(uint64_t offset, uint64_t n) {
    if (finished_) throw Error("internal error: writing after the end of the encrypted file", name_, offset);
    if (n == 0) return;
    auto next = reserved_.lower_bound(offset);
    if (next != reserved_.begin() && std::prev(next)->second == offset) {
        std::prev(next)->second = offset + n;  // extends the one before
    } else {
        reserved_.emplace(offset, offset + n);
    }
    grow_extent(offset + n);
}

void EncryptingOutput::hold(uint64_t offset, uint64_t n) {
    if (n > 0) holds_.emplace_back(offset, offset + n);
}

// [b, e) lies in the held ranges (else an internal Error).
void EncryptingOutput::check_held(uint64_t b, uint64_t e) const {
    while (b < e) {
        const auto h = std::find_if(holds_.begin(), holds_.end(), [&](const auto& r) { return r.first <= b && b < r.second; });
        if (h == holds_.end())
            throw Error("internal error: rewriting bytes of the encrypted file that were neither reserved nor held", name_,
                        b);
        b = std::min(h->second, e);
    }
}

void EncryptingOutput::rewrite(uint64_t offset, std::span<const std::byte> data) {
    if (data.empty()) return;
    const uint64_t end = offset + data.size();
    const auto* src = reinterpret_cast<const uint8_t*>(data.data());
    for (uint64_t index = offset / kChunk; index <= (end - 1) / kChunk; ++index)
        if (sealed(index)) pending(index, std::max(offset, index * kChunk));  // throws: sealed already
    // Every byte rewritten is reserved (not filled yet) or held: collect the
    // reserved pieces taken (they become final), then check the rest is held.
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    auto it = reserved_.upper_bound(offset);
    if (it != reserved_.begin()) --it;
    while (it != reserved_.end() && it->first < end) {
        const uint64_t b = std::max(it->first, offset), e = std::min(it->second, end);
        if (b >= e) {
            ++it;
            continue;
        }
        taken.emplace_back(b, e);
        const uint64_t rb = it->first, re = it->second;
        it = reserved_.erase(it);
        if (rb < b) reserved_.emplace(rb, b);
        if (e < re) it = reserved_.emplace(e, re).first;
    }
    uint64_t at = offset;
    for (const auto& [b, e] : taken) {
        check_held(at, b);
        at = e;
    }
    check_held(at, end);
    // Copy, chunk by chunk; the reserved pieces count as final now.
    for (uint64_t a = offset; a < end;) {
        const uint64_t index = a / kChunk, in = a % kChunk;
        const uint64_t len = std::min(kChunk - in, end - a);
        Pending& p = pending(index, a);
        std::memcpy(p.plain.bytes().data() + in, src + (a - offset), len);
        a += len;
    }
    for (const auto& [b, e] : taken)
        for (uint64_t a = b; a < e;) {
            const uint64_t index = a / kChunk;
            const uint64_t len = std::min((index + 1) * kChunk, e) - a;
            pending_.at(index).final_bytes += len;
            a += len;
        }
    for (uint64_t index = offset / kChunk; index <= (end - 1) / kChunk; ++index) try_seal(index);
}

void EncryptingOutput::finish(uint64_t size) {
    if (finished_) return;
    if (extent_ > size) throw Error("internal error: bytes written past the end of the encrypted file", name_, size);
    finished_ = true;
    holds_.clear();
    const uint64_t last = size == 0 ? 0 : (size - 1) / kChunk;
    for (uint64_t index = 0; index <= last; ++index) {
        if (sealed(index)) continue;
        const uint64_t len = index == last ? size - index * kChunk : kChunk;
        auto it = pending_.find(index);
        const uint8_t* plain = it == pending_.end() ? zero_chunk() : it->second.plain.bytes().data();
        seal(index, std::span(plain, len), index == last);
        if (it != pending_.end()) pending_.erase(it);
    }
    pending_.clear();
    reserved_.clear();
    if (pool_) pool_->drain();
}

}  // namespace xendump::io
