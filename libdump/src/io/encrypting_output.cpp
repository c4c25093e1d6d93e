#include "io/encrypting_output.hpp"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstring>
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

// A position in the bytes of a list of buffers (put()'s): element `v`,
// `skip` bytes into it.
struct Cursor {
    std::span<const iovec> iov;
    size_t v = 0;
    uint64_t skip = 0;

    // Where the next byte is (one at least is left).
    const iovec* here() {
        while (skip == iov[v].iov_len) ++v, skip = 0;
        return &iov[v];
    }
    // Moves past `n` bytes, giving each piece to f(its bytes or nullptr for zeros, size).
    template <class F>
    void pass(uint64_t n, F&& f) {
        while (n > 0) {
            const iovec* e = here();
            const uint64_t k = std::min(n, e->iov_len - skip);
            f(e->iov_base ? static_cast<const uint8_t*>(e->iov_base) + skip : nullptr, k);
            skip += k;
            n -= k;
        }
    }
};
}  // namespace

// Seals the chunks queued by one call of the output, then writes them (see
// the header), on `workers` threads and the caller's, and returns when all
// are written: their plaintext is the caller's, borrowed for the call. A job
// is a run of up to kChunksPerJob chunks that lie side by side in the file:
// one wake-up of a thread, one write. A job takes a slot (its sealed bytes)
// while it is sealed and, for an in-order output, until the caller has
// written it.
class EncryptingOutput::SealPool {
public:
    struct Item {
        uint64_t index = 0, size = 0;
        Plain plain;
        bool last = false;
    };

    SealPool(age::Encryptor& enc, const Emit& emit, const Room& room, bool positional, unsigned workers)
        : enc_(enc), emit_(emit), room_(room), positional_(positional),
          slots_(workers ? size_t{workers + 1} * kSlotsPerThread : 1) {
        for (age::Bytes& s : slots_) {
            s.resize(kChunksPerJob * age::kSealedChunkSize);
            free_.push_back(&s);
        }
        for (unsigned i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
    }
    ~SealPool() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        work_cv_.notify_all();
        for (std::thread& t : threads_) t.join();
    }
    SealPool(const SealPool&) = delete;
    SealPool& operator=(const SealPool&) = delete;

    size_t chunks() const noexcept { return slots_.size() * kChunksPerJob; }
    void add(const Item& item) { items_.push_back(item); }
    size_t queued() const noexcept { return items_.size(); }

    // Seals and writes every chunk queued. An error (a seal's, a write's)
    // stops what has not started; the one of the first chunk is thrown once
    // no thread works on the call's chunks any more.
    void run() {
        if (items_.empty()) return;
        if (room_) {
            uint64_t total = 0;
            for (const Item& it : items_) total += it.size + age::kTagSize;
            try {
                room_(total, enc_.chunk_offset(items_.front().index));
            } catch (...) {
                items_.clear();
                throw;
            }
        }
        std::unique_lock lock(mutex_);
        for (size_t i = 0; i < items_.size(); ++i) {
            const Item& it = items_[i];
            if (jobs_.empty() || jobs_.back().count == kChunksPerJob || items_[i - 1].index + 1 != it.index)
                jobs_.push_back(Job{.first = i, .at = enc_.chunk_offset(it.index)});
            ++jobs_.back().count;
            jobs_.back().bytes += it.size + age::kTagSize;
        }
        next_ = 0;
        failed_ = false;
        // The caller takes a job itself: threads are woken for the others only.
        if (jobs_.size() > threads_.size())
            work_cv_.notify_all();
        else
            for (size_t i = 1; i < jobs_.size(); ++i) work_cv_.notify_one();
        for (size_t e = 0; e < jobs_.size() && !failed_; ++e) {
            Job& j = jobs_[e];
            // Seal rather than wait idle.
            while (j.state == Job::queued || j.state == Job::running) {
                if (failed_) break;
                if (can_take())
                    take(lock, caller_pieces_);
                else
                    done_cv_.wait(lock);
            }
            if (failed_ || positional_) continue;
            // In order: the caller writes each job once sealed.
            lock.unlock();
            std::exception_ptr error;
            try {
                emit_(j.at, std::span<const uint8_t>(j.slot->data(), j.bytes));
            } catch (...) {
                error = std::current_exception();
            }
            lock.lock();
            finished(j, error);
        }
        done_cv_.wait(lock, [this] { return running_ == 0; });
        std::exception_ptr error;
        for (Job& j : jobs_) {
            if (!error) error = j.error;
            if (j.slot) free_.push_back(j.slot);  // sealed, not written after an error
        }
        jobs_.clear();
        items_.clear();
        if (error) std::rethrow_exception(error);
    }

private:
    struct Job {
        size_t first = 0, count = 0;  // items_[first, first + count)
        uint64_t at = 0, bytes = 0;   // where its sealed bytes go, how many
        enum State { queued, running, sealed, done } state = queued;
        age::Bytes* slot = nullptr;
        std::exception_ptr error{};
    };

    bool can_take() const { return next_ < jobs_.size() && !failed_ && !free_.empty(); }

    // Job `j` is written (or failed): its slot is free.
    void finished(Job& j, std::exception_ptr error) {
        if (error) {
            j.error = error;
            failed_ = true;
        }
        j.state = Job::done;
        free_.push_back(std::exchange(j.slot, nullptr));
        // A thread is woken only for a job it can take now (a wake-up for
        // nothing costs two context switches).
        if (can_take()) work_cv_.notify_one();
    }

    // Takes the next job and seals it (positional: and writes it) on this thread.
    void take(std::unique_lock<std::mutex>& lock, std::vector<std::span<const uint8_t>>& pieces) {
        Job& j = jobs_[next_++];
        j.slot = free_.back();
        free_.pop_back();
        j.state = Job::running;
        ++running_;
        lock.unlock();
        std::exception_ptr error;
        try {
            seal(j, pieces);
            if (positional_) emit_(j.at, std::span<const uint8_t>(j.slot->data(), j.bytes));
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        --running_;
        if (positional_ || error)
            finished(j, error);
        else
            j.state = Job::sealed;
        done_cv_.notify_all();
    }

    // Each chunk from its pieces where they lie, into the job's slot.
    void seal(const Job& j, std::vector<std::span<const uint8_t>>& pieces) {
        for (size_t k = 0; k < j.count; ++k) {
            const Item& it = items_[j.first + k];
            pieces.clear();
            const iovec* v = it.plain.iov ? it.plain.iov : &it.plain.own;
            for (uint64_t skip = it.plain.skip, left = it.size; left > 0; ++v, skip = 0) {
                const uint64_t n = std::min<uint64_t>(v->iov_len - skip, left);
                if (n) pieces.emplace_back(v->iov_base ? static_cast<const uint8_t*>(v->iov_base) + skip : zero_chunk(), n);
                left -= n;
            }
            enc_.seal(it.index, pieces, it.last,
                      std::span(j.slot->data() + k * age::kSealedChunkSize, it.size + age::kTagSize));
        }
    }

    void work() {
        std::vector<std::span<const uint8_t>> pieces;
        std::unique_lock lock(mutex_);
        for (;;) {
            work_cv_.wait(lock, [this] { return stop_ || can_take(); });
            if (stop_) return;
            take(lock, pieces);
        }
    }

    age::Encryptor& enc_;
    const Emit& emit_;
    const Room& room_;
    const bool positional_;
    std::vector<age::Bytes> slots_;
    std::vector<Item> items_;  // queued by the caller, sealed by run()
    std::vector<std::span<const uint8_t>> caller_pieces_;
    std::mutex mutex_;
    std::condition_variable work_cv_, done_cv_;
    // Under mutex_ while run() runs:
    std::vector<Job> jobs_;
    std::vector<age::Bytes*> free_;
    size_t next_ = 0;     // the next job to take
    size_t running_ = 0;  // jobs being sealed (or written) on some thread
    bool failed_ = false;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

EncryptingOutput::EncryptingOutput(std::span<const age::Recipient> recipients, Emit emit, std::string name,
                                   unsigned threads, Placing placing, Room room)
    : enc_(recipients), emit_(std::move(emit)), room_(std::move(room)), name_(std::move(name)),
      positional_(placing == Placing::positional) {
    // Sealing threads beyond the machine's CPUs would add their slots'
    // memory, not speed (the file is the same whatever their number).
    threads = std::min({threads, kMaxWriteThreads, std::max(1u, std::thread::hardware_concurrency())});
    pool_ = std::make_unique<SealPool>(enc_, emit_, room_, placing == Placing::positional, threads > 1 ? threads : 0);
}

// The pool's threads go first: they use enc_ and emit_.
EncryptingOutput::~EncryptingOutput() { pool_.reset(); }

size_t EncryptingOutput::seal_slots() const noexcept { return pool_->chunks(); }

void EncryptingOutput::begin() {
    if (room_) room_(enc_.head().size(), 0);
    emit_(0, enc_.head());
}

uint64_t EncryptingOutput::file_offset(uint64_t plain) const noexcept {
    return enc_.chunk_offset(plain / kChunk) + plain % kChunk;
}

EncryptingOutput::Pending& EncryptingOutput::pending(uint64_t index, uint64_t at) {
    if (sealed(index) || sealed_ahead(index))
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

void EncryptingOutput::mark_sealed(uint64_t index) {
    if (index >= sealed_.size()) sealed_.resize(std::max<uint64_t>(index + 1, sealed_.size() * 2));
    sealed_[index] = true;
}

bool EncryptingOutput::sealed_ahead(uint64_t index) {
    if (!positional_) return false;
    std::lock_guard lock(ahead_mutex_);
    return ahead_.count(index) != 0;
}

bool EncryptingOutput::take_ahead(uint64_t index, ReadyRun& ready) {
    if (!positional_) return false;
    std::lock_guard lock(ahead_mutex_);
    if (ahead_.erase(index) == 0) return false;
    if (auto it = ready_.find(index); it != ready_.end()) {
        ready = std::move(it->second);
        ready_.erase(it);
    }
    return true;
}

uint64_t EncryptingOutput::seal_ahead(uint64_t offset, std::span<const iovec> iov, uint64_t from, uint64_t to,
                                      AheadRun& run) {
    if (!positional_) return from;
    uint64_t n = 0;
    for (const iovec& v : iov) n += v.iov_len;
    from = std::max(from, offset);
    to = std::min(to, offset + n);
    // Chunks [first, end) lie whole in [from, to).
    const uint64_t first = (from + kChunk - 1) / kChunk, end = to / kChunk;
    if (first >= end) return from;
    Cursor c{iov};
    c.pass(first * kChunk - offset, [](const uint8_t*, uint64_t) {});
    uint64_t index = first;
    for (; index < end; ++index) {
        if (run.count > 0 && (run.next != index || run.count == kAheadChunks)) flush_ahead(run);
        {
            std::lock_guard lock(ahead_mutex_);
            // Past the budget, put() seals the rest on its thread.
            if (ahead_bytes_ + age::kSealedChunkSize > kAheadBudget) break;
            ahead_bytes_ += age::kSealedChunkSize;
            ahead_.insert(index);
            if (!run.sealed) {
                if (ahead_free_.empty()) {
                    // Not written until sealed: memory only for what is.
                    run.sealed = std::make_unique_for_overwrite<uint8_t[]>(kAheadChunks * age::kSealedChunkSize);
                } else {
                    run.sealed = std::move(ahead_free_.back());
                    ahead_free_.pop_back();
                }
            }
        }
        if (run.count == 0) run.at = enc_.chunk_offset(index);
        run.pieces.clear();
        c.pass(kChunk, [&](const uint8_t* p, uint64_t k) { run.pieces.emplace_back(p ? p : zero_chunk(), k); });
        // The Encryptor refuses a chunk sealed already (by put(), or ahead twice).
        enc_.seal(index, run.pieces, false, std::span(run.sealed.get() + run.bytes, age::kSealedChunkSize));
        run.bytes += age::kSealedChunkSize;
        run.next = index + 1;
        ++run.count;
    }
    return index == first ? from : index * kChunk;
}

void EncryptingOutput::flush_ahead(AheadRun& run) {
    std::lock_guard lock(ahead_mutex_);
    if (run.count > 0) {
        // Written by put() when it passes over the run's first chunk: one
        // thread writes the file, in order, as an unencrypted dump's does.
        ready_.emplace(run.next - run.count, ReadyRun{.at = run.at, .bytes = run.bytes, .sealed = std::move(run.sealed)});
        run.count = 0;
        run.bytes = 0;
    } else if (run.sealed) {
        ahead_free_.push_back(std::move(run.sealed));
    }
}

void EncryptingOutput::queue(uint64_t index, const Plain& plain, uint64_t size, bool last) {
    mark_sealed(index);
    pool_->add({.index = index, .size = size, .plain = plain, .last = last});
    if (pool_->queued() >= kWindowChunks) seal_queued();
}

void EncryptingOutput::seal_queued() {
    try {
        pool_->run();
    } catch (...) {
        retired_.clear();
        throw;
    }
    retired_.clear();
}

// A chunk is sealed (not as the last) once its 64 KiB are final, no hold
// covers it and something lies past it. Its plaintext is kept until then.
void EncryptingOutput::try_seal(uint64_t index) {
    auto it = pending_.find(index);
    if (it == pending_.end() || it->second.final_bytes != kChunk) return;
    if (extent_ <= (index + 1) * kChunk || held(index)) return;
    retired_.push_back(std::move(it->second.plain));
    pending_.erase(it);
    queue(index, Plain{.own = {retired_.back().bytes().data(), kChunk}}, kChunk, false);
}

void EncryptingOutput::grow_extent(uint64_t end) {
    if (end <= extent_) return;
    const uint64_t before = extent_;
    extent_ = end;
    // The chunk that ended the file so far is not the last any more.
    if (before > 0) try_seal((before - 1) / kChunk);
}

void EncryptingOutput::put(uint64_t offset, const std::byte* data, uint64_t n) {
    const iovec v{const_cast<std::byte*>(data), n};
    put(offset, std::span(&v, 1));
}

void EncryptingOutput::put(uint64_t offset, std::span<const iovec> iov) {
    if (finished_) throw Error("internal error: writing after the end of the encrypted file", name_, offset);
    uint64_t n = 0;
    for (const iovec& v : iov) n += v.iov_len;
    if (n == 0) return;
    grow_extent(offset + n);
    Cursor c{iov};
    for (uint64_t at = offset; at < offset + n;) {
        const uint64_t index = at / kChunk, in = at % kChunk;
        const uint64_t len = std::min(kChunk - in, offset + n - at);
        if (ReadyRun ready; take_ahead(index, ready)) {
            // Sealed already (seal_ahead()), from these bytes.
            if (len != kChunk || pending_.count(index) || held(index))
                throw Error("internal error: chunk " + std::to_string(index) +
                                " of the encrypted file was sealed ahead, but its bytes are not put whole",
                            name_, at);
            mark_sealed(index);
            if (ready.sealed) {
                if (room_) room_(ready.bytes, ready.at);
                emit_(ready.at, std::span<const uint8_t>(ready.sealed.get(), ready.bytes));
                std::lock_guard lock(ahead_mutex_);
                ahead_bytes_ -= ready.bytes;
                ahead_free_.push_back(std::move(ready.sealed));
            }
            c.pass(len, [](const uint8_t*, uint64_t) {});
        } else if (len == kChunk && !pending_.count(index) && extent_ > (index + 1) * kChunk && !held(index)) {
            // A whole chunk at once: sealed from the caller's bytes where they lie.
            if (sealed(index)) pending(index, at);  // throws
            const iovec* from = c.here();
            queue(index, Plain{.iov = from, .skip = c.skip}, kChunk, false);
            c.pass(len, [](const uint8_t*, uint64_t) {});
        } else {
            Pending& p = pending(index, at);
            uint8_t* to = p.plain.bytes().data() + in;
            c.pass(len, [&](const uint8_t* from, uint64_t k) {
                if (from)
                    std::memcpy(to, from, k);
                else
                    std::memset(to, 0, k);
                to += k;
            });
            p.final_bytes += len;
            try_seal(index);
        }
        at += len;
    }
    seal_queued();
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
    seal_queued();
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
        if (sealed(index) || sealed_ahead(index)) pending(index, std::max(offset, index * kChunk));  // throws
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
    seal_queued();
}

void EncryptingOutput::finish(uint64_t size) {
    if (finished_) return;
    if (extent_ > size) throw Error("internal error: bytes written past the end of the encrypted file", name_, size);
    {
        std::lock_guard lock(ahead_mutex_);
        if (!ahead_.empty())
            throw Error("internal error: chunk " + std::to_string(*ahead_.begin()) +
                            " of the encrypted file was sealed ahead of bytes never put",
                        name_, *ahead_.begin() * kChunk);
    }
    finished_ = true;
    holds_.clear();
    const uint64_t last = size == 0 ? 0 : (size - 1) / kChunk;
    for (uint64_t index = 0; index <= last; ++index) {
        if (sealed(index)) continue;
        const uint64_t len = index == last ? size - index * kChunk : kChunk;
        auto it = pending_.find(index);
        Plain plain;  // zeros, unless some bytes were written
        if (it != pending_.end()) {
            retired_.push_back(std::move(it->second.plain));
            pending_.erase(it);
            plain.own.iov_base = retired_.back().bytes().data();
        }
        plain.own.iov_len = len;
        queue(index, plain, len, index == last);
    }
    seal_queued();
    // A chunk sealed ahead (not as the last) that turns out to be the last.
    if (!enc_.complete())
        throw Error("internal error: the encrypted file's last chunk was sealed as not the last", name_, size);
    pending_.clear();
    reserved_.clear();
}

}  // namespace xendump::io
