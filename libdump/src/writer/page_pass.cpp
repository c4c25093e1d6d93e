#include "writer/page_pass.hpp"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "stream_hash.hpp"
#include "xendump/error.hpp"

namespace xendump::writer {

namespace {

constexpr uint64_t kPage = format::kPageSize;
// Small enough that a batch is still in the CPU cache when it is hashed and
// written, and that two of them stay far below the memory bound (issue 7:
// 64 MiB + 24 B per guest page); large enough to keep syscalls cheap.
constexpr size_t kMinBatch = 256;      // 1 MiB
constexpr size_t kMaxBatch = 1024;     // 4 MiB, twice (double buffering)

// A batch's pages are either lent by the source (a mapping, no copy) or read
// into `data`; page[i] points at page i either way (at zeros when unreadable).
struct Batch {
    size_t first = 0, count = 0;
    std::vector<std::byte> data;
    std::unique_ptr<LentPages> lent;
    std::vector<const std::byte*> page;
    std::vector<uint8_t> unreadable;
    std::vector<uint8_t> zero;  // per page, filled with the batch (one check serves hash and holes)
    std::optional<FileRange> range;  // pages were read from here (copy_file_range candidate)
};

const std::byte* zero_page() {
    alignas(64) static const std::byte zeros[kPage] = {};
    return zeros;
}

bool is_zero_page(const std::byte* p) {
    uint64_t head;
    std::memcpy(&head, p, sizeof head);
    // The first 8 bytes are zero and every byte equals the one 8 further on.
    return head == 0 && std::memcmp(p, p + 8, kPage - 8) == 0;
}

void pread_all(int fd, uint64_t off, std::byte* out, size_t len) {
    while (len > 0) {
        ssize_t r = ::pread(fd, out, len, static_cast<off_t>(off));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw_errno("cannot read source pages", {}, off);
        if (r == 0) throw Error("source file ends early", {}, off);
        out += r;
        off += static_cast<uint64_t>(r);
        len -= static_cast<size_t>(r);
    }
}

void fill_pages(Batch& b, PageSource& source, bool positional) {
    const size_t bytes = b.count * kPage;
    b.range.reset();
    b.lent.reset();
    std::fill_n(b.unreadable.begin(), b.count, 0);
    if (positional) b.range = source.file_range(b.first, b.count);
    if (!b.range) b.lent = source.lend_pages(b.first, b.count);
    if (b.lent) {
        for (size_t i = 0; i < b.count; ++i) {
            b.page[i] = b.lent->page(i);
            if (!b.page[i]) b.unreadable[i] = 1;
        }
        return;
    }
    if (b.data.size() < bytes) b.data.resize(bytes);  // only sources that do not lend need it
    if (b.range)
        pread_all(b.range->fd, b.range->offset, b.data.data(), bytes);
    else
        source.read_pages(b.first, b.count, std::span(b.data.data(), bytes), std::span(b.unreadable.data(), b.count));
    for (size_t i = 0; i < b.count; ++i) b.page[i] = b.data.data() + i * kPage;
}

// Fills the batch and classifies its pages, on the filler thread: the zero
// check reads every page, and doing it here, just after the pages were
// mapped, spreads the pass over two cores (the caller hashes and writes).
// An unreadable page is stored as zeros (xen-dump-core(5) "Trailer notes"), whatever the source left.
void fill(Batch& b, PageSource& source, bool positional, bool want_zero) {
    fill_pages(b, source, positional);
    for (size_t i = 0; i < b.count; ++i) {
        if (b.unreadable[i]) b.page[i] = zero_page();
        if (want_zero) b.zero[i] = b.unreadable[i] || is_zero_page(b.page[i]);
    }
}

class ChunkHasher {
public:
    explicit ChunkHasher(uint64_t nr_pages) : total_(nr_pages), chunks_(format::kDigestChunkPages * kPage) {}
    // Pages arrive in order; a chunk closes after kDigestChunkPages pages or
    // at the end. A whole chunk of zero pages (zero[i] != 0) takes the digest
    // of zeros computed once: zero-heavy guests are not hashed byte by byte.
    void add(const std::byte* const* pages, const uint8_t* zero, size_t count) {
        auto keep = [this](const XXH128_canonical_t& c) { digests.push_back(c); };
        while (count > 0) {
            const size_t room = format::kDigestChunkPages - static_cast<size_t>(chunks_.pending() / kPage);
            const size_t take = std::min(room, count);
            if (take == format::kDigestChunkPages && std::all_of(zero, zero + take, [](uint8_t z) { return z; })) {
                digests.push_back(zero_chunk_digest());
            } else {
                // Pages that follow each other in memory go to XXH3 in one call.
                for (size_t i = 0; i < take;) {
                    size_t j = i + 1;
                    while (j < take && pages[j] == pages[j - 1] + kPage) ++j;
                    chunks_.update(pages[i], (j - i) * kPage, keep);
                    i = j;
                }
            }
            pages += take;
            zero += take;
            count -= take;
            done_ += take;
            if (done_ == total_ && chunks_.pending() != 0) digests.push_back(chunks_.finish());
        }
    }
    std::vector<XXH128_canonical_t> digests;

private:
    static XXH128_canonical_t zero_chunk_digest() {
        static const XXH128_canonical_t digest = [] {
            const std::vector<std::byte> zeros(size_t{format::kDigestChunkPages} * kPage);
            XXH128_canonical_t c;
            XXH128_canonicalFromHash(&c, XXH3_128bits(zeros.data(), zeros.size()));
            return c;
        }();
        return digest;
    }

    uint64_t total_, done_ = 0;
    ChunkedHash chunks_;  // the chunk being hashed
};

// Runs of pages [i, j) as iovecs, one per stretch of adjacent memory.
void write_pages_of(io::Sink& sink, const Batch& b, size_t i, size_t j, std::vector<iovec>& iov) {
    iov.clear();
    for (; i < j; ++i) {
        auto* p = const_cast<std::byte*>(b.page[i]);
        if (!iov.empty() && static_cast<std::byte*>(iov.back().iov_base) + iov.back().iov_len == p)
            iov.back().iov_len += kPage;
        else
            iov.push_back({p, kPage});
    }
    sink.writev(iov);
}

// The thread that fills the next batch while the caller hashes and writes
// the current one: one thread for the whole pass (one per batch would cost a
// clone every 4 MiB). start() hands it a batch; wait() returns when that
// batch is filled and rethrows what filling it threw. Destroying it waits
// for a batch in progress, so it must go before the batches it fills.
class Filler {
public:
    explicit Filler(std::function<void(Batch&)> fill) : fill_(std::move(fill)), thread_([this] { run(); }) {}
    ~Filler() {
        {
            std::lock_guard lock(m_);
            stop_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    Filler(const Filler&) = delete;
    Filler& operator=(const Filler&) = delete;

    void start(Batch& b) {
        {
            std::lock_guard lock(m_);
            job_ = &b;
            done_ = false;
        }
        cv_.notify_all();
    }
    void wait() {
        std::unique_lock lock(m_);
        cv_.wait(lock, [this] { return done_; });
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    }

private:
    void run() {
        std::unique_lock lock(m_);
        for (;;) {
            cv_.wait(lock, [this] { return stop_ || job_ != nullptr; });
            if (stop_) return;
            Batch* b = std::exchange(job_, nullptr);
            lock.unlock();
            std::exception_ptr error;
            try {
                fill_(*b);
            } catch (...) {
                error = std::current_exception();
            }
            lock.lock();
            error_ = error;
            done_ = true;
            cv_.notify_all();
        }
    }

    std::function<void(Batch&)> fill_;
    std::mutex m_;
    std::condition_variable cv_;
    Batch* job_ = nullptr;
    bool done_ = true, stop_ = false;
    std::exception_ptr error_;
    std::thread thread_;  // last: it starts running in the constructor
};

void write_batch(io::Sink& sink, const Batch& b, std::vector<iovec>& iov) {
    const size_t bytes = b.count * kPage;
    if (b.range && sink.copy_from(b.range->fd, b.range->offset, bytes)) return;
    if (!sink.holes()) {
        write_pages_of(sink, b, 0, b.count, iov);
        return;
    }
    // Alternate runs of data pages (one write each) and zero pages (holes).
    size_t i = 0;
    while (i < b.count) {
        const bool zero = b.zero[i];
        size_t j = i + 1;
        while (j < b.count && static_cast<bool>(b.zero[j]) == zero) ++j;
        if (zero)
            sink.zeros((j - i) * kPage);
        else
            write_pages_of(sink, b, i, j, iov);
        i = j;
    }
}

}  // namespace

PassResult write_pages(io::Sink& sink, PageSource& source, const DumpPlan& plan, const WriteOptions& options) {
    const auto entries = source.entries();
    const uint64_t n = entries.size();
    PassResult result;
    std::optional<ChunkHasher> hasher;
    if (plan.digest_note_size) hasher.emplace(n);

    const size_t batch_pages = std::clamp(source.preferred_batch(), kMinBatch, kMaxBatch);
    Batch batches[2];
    const size_t capacity = static_cast<size_t>(std::min<uint64_t>(batch_pages, std::max<uint64_t>(n, 1)));
    for (auto& b : batches) {
        b.unreadable.resize(capacity);
        b.zero.resize(capacity);
        b.page.resize(capacity);
    }
    std::vector<iovec> iov;
    const bool want_zero = hasher || sink.holes();  // zero[] serves only these two
    Filler filler([&source, &sink, want_zero](Batch& b) { fill(b, source, sink.positional(), want_zero); });
    auto schedule = [&](Batch& b, size_t first) {
        b.first = first;
        b.count = static_cast<size_t>(std::min<uint64_t>(batch_pages, n - first));
        filler.start(b);
    };

    bool pending = n > 0;
    if (pending) schedule(batches[0], 0);
    for (size_t k = 0; pending; ++k) {
        Batch& cur = batches[k % 2];
        filler.wait();  // rethrows the source's Error
        if (options.cancel && options.cancel->load()) throw Error("cancelled");
        const size_t next = cur.first + cur.count;
        pending = next < n;
        if (pending) schedule(batches[(k + 1) % 2], next);

        for (size_t i = 0; i < cur.count; ++i) {
            const uint64_t pfn = entries[cur.first + i].pfn;
            if (cur.unreadable[i]) result.unreadable_pfns.push_back(pfn);
            if (options.page_observer) options.page_observer(pfn, std::span<const std::byte>(cur.page[i], kPage));
        }
        if (hasher) hasher->add(cur.page.data(), cur.zero.data(), cur.count);
        write_batch(sink, cur, iov);
        cur.lent.reset();  // the mapping goes as soon as its pages are written

        if (options.on_progress) {
            WriteProgress p;
            p.pages_done = next;
            p.pages_total = n;
            p.bytes_done = sink.offset();
            p.bytes_total = plan.file_size;
            options.on_progress(p);
        }
    }
    if (hasher) result.chunk_digests = std::move(hasher->digests);
    return result;
}

}  // namespace xendump::writer
