// The page pipeline (libdump/src/pipeline): the bytes written do not depend
// on the number of threads; selectors drop pages for every later stage;
// observers see the kept pages in pfn order; an encoder can finish its
// header after the pass; errors of any stage end the pass.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "dump_check.hpp"
#include "io/sink.hpp"
#include "pipeline/batch_source.hpp"
#include "pipeline/ordered_batches.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/selector.hpp"
#include "writer/v1_encoder.hpp"
#include "writer/write_v1.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {
namespace {

using format::GuestType;

// A pattern source read in batches of `batch` pages.
class BatchedSource : public PatternPageSource {
public:
    using PatternPageSource::PatternPageSource;
    size_t preferred_batch() const override { return batch; }
    size_t batch = 1024;
};

// A source with holes, unreadable pages, whole digest chunks of zeros and
// scattered zero pages, read in batches that are not a multiple of the
// digest chunk.
struct Guest {
    DumpSpec spec;
    std::vector<uint64_t> pfns;
    BatchedSource source;
    Guest(GuestType type, size_t pages)
        : spec(make_spec(type, 8, 2)), pfns(pfns_with_holes(pages)), source(entries_for(pfns, type)) {
        source.unreadable_pfns = {pfns[3], pfns[pages / 2], pfns[pages - 1]};
        // A whole digest chunk of zeros and more, as far as a small guest has pages.
        const auto zeros_end = static_cast<std::ptrdiff_t>(std::min<size_t>(1300, pfns.size()));
        source.zero_pfns.assign(pfns.begin() + std::min<std::ptrdiff_t>(512, zeros_end), pfns.begin() + zeros_end);
        for (size_t i = 2000; i < pages; i += 97) source.zero_pfns.push_back(pfns[i]);
        std::sort(source.zero_pfns.begin(), source.zero_pfns.end());
        source.batch = 700;
    }
};

class Threads : public testing::TestWithParam<GuestType> {};

TEST_P(Threads, GiveByteIdenticalFilesAndStreams) {
    TempDir dir;
    Guest g(GetParam(), 5000);
    std::vector<std::byte> first;
    for (unsigned threads : {1u, 2u, 4u, 64u}) {
        for (bool digests : {true, false}) {
            WriteOptions opt;
            opt.threads = threads;
            opt.digests = digests;
            const auto name = "t" + std::to_string(threads) + (digests ? "d" : "n");
            const WriteResult r = write_dump_file(dir / name, g.spec, g.source, opt);
            EXPECT_EQ(r.unreadable_pfns.size(), 3u);
            check_dump(dir / name, g.spec, g.source, digests);
            EXPECT_EQ(slurp(dir / name), slurp(dir / ("t1" + std::string(digests ? "d" : "n")))) << name;
            EXPECT_TRUE(through_pipe([&](int fd) { write_dump(fd, false, g.spec, g.source, opt); }) == slurp(dir / name))
                << name;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Pipeline, Threads, testing::Values(GuestType::pv, GuestType::hvm),
                         [](const auto& i) { return std::string(format::to_string(i.param)); });

// Issue 19: the pages in flight stay within the budget from 1 to 64 threads
// (64 threads took 66 batches of 4 MiB before it), more threads get more
// workers, batches stay a multiple of the encoder's alignment, and with
// workers at least kLookahead batches are in flight.
TEST(Pipeline, BatchesInFlightStayWithinTheBudgetFrom1To64Threads) {
    EXPECT_EQ(kMaxWriteThreads, 64u);
    for (size_t alignment : {size_t{1}, size_t{format::kDigestChunkPages}})
        for (size_t preferred : {size_t{1}, size_t{700}, size_t{1024}, size_t{2048}, size_t{1} << 20}) {
            unsigned last_workers = 0;
            for (unsigned threads = 1; threads <= kMaxWriteThreads; ++threads) {
                SCOPED_TRACE(std::to_string(threads) + " threads, batches of " + std::to_string(preferred) +
                             " preferred, alignment " + std::to_string(alignment));
                const pipeline::BatchPlan p = pipeline::plan_batches(preferred, alignment, threads);
                EXPECT_LE(p.pages * p.in_flight, pipeline::kInFlightPages);
                EXPECT_LE(p.pages, pipeline::kMaxBatchPages);
                EXPECT_GE(p.pages, std::min(pipeline::kMinBatchPages, alignment));
                EXPECT_EQ(p.pages % alignment, 0u);
                if (threads == 1) {
                    EXPECT_EQ(p.workers, 0u);
                    EXPECT_EQ(p.in_flight, 2u);
                } else {
                    EXPECT_GE(p.workers, 1u);
                    EXPECT_LE(p.workers, threads);
                    EXPECT_GE(p.in_flight, p.workers + 2);  // one read, one delivered
                    // A slow batch does not stop the workers behind it.
                    EXPECT_GE(p.in_flight, std::min<size_t>(pipeline::kLookahead, pipeline::kInFlightPages / alignment));
                    EXPECT_GE(p.workers, last_workers);
                }
                last_workers = p.workers;
            }
            // Past 8 threads (the old maximum), more workers still.
            EXPECT_GT(pipeline::plan_batches(preferred, alignment, 64).workers, 8u);
            // Out of range: clamped.
            EXPECT_EQ(pipeline::plan_batches(preferred, alignment, 0).workers, 0u);
            EXPECT_EQ(pipeline::plan_batches(preferred, alignment, 1000).workers,
                      pipeline::plan_batches(preferred, alignment, 64).workers);
        }
    // Two threads (this machine's cores): both work, 16 batches of 2 MiB in flight.
    EXPECT_EQ(pipeline::plan_batches(1024, 1, 2).workers, 2u);
    EXPECT_EQ(pipeline::plan_batches(1024, 1, 2).in_flight, 16u);
    // One: the reader fills one batch of 4 MiB while the caller works on the other.
    EXPECT_EQ(pipeline::plan_batches(1024, 1, 1).pages, 1024u);
    EXPECT_EQ(pipeline::plan_batches(1024, 1, 1).in_flight, 2u);
}

// The reader keeps near the workers when the work is what takes the time
// (an encrypted file's pages hashed and sealed there): a batch is worked on
// soon after it was read, not after all 16 slots have been filled ahead of
// it; every batch is still delivered once, in order.
TEST(Pipeline, TheReaderStaysAFewBatchesAheadOfSlowWorkers) {
    constexpr size_t kBatches = 60, kInFlight = 16;
    constexpr unsigned kWorkers = 2;
    std::atomic<size_t> started = 0, most_ahead = 0;
    pipeline::OrderedBatches batches(
        kBatches, kWorkers, kInFlight, 1,
        [&](pipeline::PageBatch& b) {
            const size_t ahead = b.first - std::min<size_t>(b.first, started.load());
            size_t m = most_ahead.load();
            while (ahead > m && !most_ahead.compare_exchange_weak(m, ahead)) {
            }
        },
        [&](pipeline::PageBatch&) {
            ++started;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        });
    std::vector<size_t> delivered;
    batches.run([&](pipeline::PageBatch& b) { delivered.push_back(b.first); }, kBatches);
    ASSERT_EQ(delivered.size(), kBatches);
    for (size_t k = 0; k < kBatches; ++k) EXPECT_EQ(delivered[k], k);
    // Two read ahead of those taken, and one per worker taken but not started yet.
    EXPECT_LE(most_ahead.load(), 2u + kWorkers);
}

// Records the pfns and first bytes of what it sees.
class Recorder final : public pipeline::PageObserver {
public:
    void observe(const pipeline::PageBatch& b) override {
        for (size_t i = 0; i < b.count; ++i)
            if (b.keep[i]) {
                pfns.push_back(b.pfn(i));
                bytes.push_back(b.page[i][100]);
            }
    }
    void finish(pipeline::FoundNotes& notes) override { notes.warnings.push_back("recorder finished"); }
    std::vector<uint64_t> pfns;
    std::vector<std::byte> bytes;
};

TEST(Pipeline, ObserversSeeEveryPageInPfnOrderWhateverTheThreads) {
    TempDir dir;
    Guest g(GuestType::pv, 4000);
    for (unsigned threads : {1u, 3u}) {
        Recorder rec;
        pipeline::PageObserver* observers[] = {&rec};
        WriteOptions opt;
        opt.threads = threads;
        std::vector<std::string> warned;
        opt.on_warning = [&](const std::string& w) { warned.push_back(w); };
        UniqueFd fd(::open((dir / std::to_string(threads)).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        ASSERT_TRUE(fd);
        const WriteResult r = writer::write_v1(fd.get(), true, "t", g.spec, g.source, opt, observers);
        EXPECT_EQ(rec.pfns, g.pfns);
        for (size_t i = 0; i < g.pfns.size(); ++i)
            ASSERT_EQ(rec.bytes[i], expected_page(g.source, i)[100]) << i;
        EXPECT_EQ(r.warnings, std::vector<std::string>{"recorder finished"});
        EXPECT_EQ(warned, r.warnings);
    }
}

// A minimal format, as a compressed one works: a header at offset 0 that
// is only final after the pass (rewritten in place), then pfn + bytes of
// every kept page; prepare() computes each page's checksum on any thread.
class ListEncoder final : public pipeline::Encoder {
public:
    struct Sums final : pipeline::BatchWork {
        std::vector<uint64_t> sums;
    };
    bool needs_zero_flags(const io::Sink&) const override { return false; }
    void begin(io::Sink& out) override { out.write(std::as_bytes(std::span(header_))); }
    void prepare(pipeline::PageBatch& b) const override {
        auto sums = std::make_unique<Sums>();
        for (size_t i = 0; i < b.count; ++i) {
            uint64_t s = 0;
            for (size_t k = 0; k < 4096; ++k) s = s * 31 + static_cast<uint8_t>(b.page[i][k]);
            sums->sums.push_back(s);
        }
        b.work = std::move(sums);
    }
    void write(pipeline::PageBatch& b, io::Sink& out) override {
        const auto& sums = dynamic_cast<const Sums&>(*b.work).sums;
        for (size_t i = 0; i < b.count; ++i) {
            if (!b.keep[i]) continue;
            const uint64_t pfn = b.pfn(i);
            out.write(std::as_bytes(std::span(&pfn, 1)));
            out.write(std::as_bytes(std::span(&sums[i], 1)));
            out.write(b.bytes(i));
        }
    }
    void finish(const pipeline::PassOutcome& pass, const pipeline::FoundNotes&, io::Sink& out) override {
        header_ = {pass.pages_read, pass.pages_kept};
        out.write_at(0, std::as_bytes(std::span(header_)));
        unreadable = pass.unreadable_pfns;
    }
    std::vector<uint64_t> unreadable;  // what the pass listed

private:
    std::array<uint64_t, 2> header_{};
};

// Keeps every third pfn.
class EveryThird final : public pipeline::PfnSet {
public:
    bool contains(uint64_t pfn) const override { return pfn % 3 == 0; }
};

// The selectors the tests run: zero pages dropped; every third pfn kept.
struct Selectors {
    const pipeline::ZeroPageSelector zeros;
    const EveryThird third;
    const pipeline::PfnSetSelector by_pfn{third};
    std::array<const pipeline::PageSelector*, 2> both() const { return {&zeros, &by_pfn}; }
};

std::vector<std::byte> encode_list(const std::filesystem::path& path, PageSource& source,
                                   const pipeline::PageSelector* select, unsigned threads,
                                   std::vector<uint64_t>* observed = nullptr, std::vector<uint64_t>* unreadable = nullptr) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) throw std::runtime_error("cannot create " + path.string());
    io::Sink sink(fd.get(), true, true, path.string());
    ListEncoder encoder;
    Recorder rec;
    WriteOptions opt;
    opt.threads = threads;
    pipeline::run({source, select, {&rec}, encoder}, sink, opt);
    if (observed) *observed = rec.pfns;
    if (unreadable) *unreadable = encoder.unreadable;
    return slurp(path);
}

TEST(Pipeline, SelectorsDropPagesForObserversAndEncoder) {
    TempDir dir;
    Guest g(GuestType::hvm, 3000);
    const Selectors sel;
    std::vector<uint64_t> nonzero, thirds;
    for (size_t i = 0; i < g.pfns.size(); ++i) {
        const bool zero = std::binary_search(g.source.zero_pfns.begin(), g.source.zero_pfns.end(), g.pfns[i]);
        const bool bad = std::find(g.source.unreadable_pfns.begin(), g.source.unreadable_pfns.end(), g.pfns[i]) !=
                         g.source.unreadable_pfns.end();
        if (!zero || bad) nonzero.push_back(g.pfns[i]);  // an unreadable page is not a zero page of the guest
        if (g.pfns[i] % 3 == 0) thirds.push_back(g.pfns[i]);
    }
    for (auto [select, want] : {std::pair{sel.both()[0], &nonzero}, std::pair{sel.both()[1], &thirds}}) {
        std::vector<std::byte> one;
        for (unsigned threads : {1u, 2u, 4u}) {
            std::vector<uint64_t> seen;
            const auto path = dir / ("l" + std::to_string(threads) + (select == &sel.zeros ? "z" : "p"));
            auto bytes = encode_list(path, g.source, select, threads, &seen);
            EXPECT_EQ(seen, *want);
            ASSERT_EQ(bytes.size(), 16 + want->size() * (16 + 4096));
            uint64_t header[2];
            std::memcpy(header, bytes.data(), sizeof header);
            EXPECT_EQ(header[0], g.pfns.size());  // finished after the pass, at its offset
            EXPECT_EQ(header[1], want->size());
            uint64_t pfn0;
            std::memcpy(&pfn0, bytes.data() + 16, 8);
            EXPECT_EQ(pfn0, want->front());
            if (one.empty()) one = bytes;
            EXPECT_TRUE(bytes == one) << threads;
        }
    }
}

// A format that lays out its pages before the first one (the compact
// format) asks for the selection in a pass of its own: selected_pfns
// gives the pages a selector keeps, whatever the threads; a PfnBitmapSet of
// them keeps exactly those in the pass that writes. Pages the selector
// leaves out are not listed as unreadable (the file does not hold them).
TEST(Pipeline, SelectedPfnsAreWhatThePassKeeps) {
    TempDir dir;
    Guest g(GuestType::pv, 3000);
    const Selectors sel;
    for (const pipeline::PageSelector* select : sel.both()) {
        const std::string kind = select == &sel.zeros ? "z" : "p";
        std::vector<uint64_t> want, unreadable;
        encode_list(dir / ("all" + kind), g.source, select, 1, &want, &unreadable);
        for (unsigned threads : {1u, 2u}) {
            SCOPED_TRACE(kind + std::to_string(threads));
            WriteOptions opt;
            opt.threads = threads;
            const kernel::PfnBitmap kept = pipeline::selected_pfns(g.source, *select, opt);
            std::vector<uint64_t> pfns;
            for (uint64_t pfn = 0; pfn < kept.size(); ++pfn)
                if (kept.test(pfn)) pfns.push_back(pfn);
            EXPECT_EQ(pfns, want);
            const pipeline::PfnBitmapSet set(kept);
            const pipeline::PfnSetSelector exactly(set);
            std::vector<uint64_t> seen;
            encode_list(dir / (kind + std::to_string(threads)), g.source, &exactly, threads, &seen);
            EXPECT_EQ(seen, want);
        }
        for (uint64_t pfn : g.source.unreadable_pfns)
            EXPECT_EQ(std::count(unreadable.begin(), unreadable.end(), pfn),
                      std::count(want.begin(), want.end(), pfn))
                << "pfn " << pfn;
    }
}

// Every third pfn again, decided the same way but not declared by_pfn: the
// pass reads every page, then selects.
class ThirdAfterReading final : public pipeline::PageSelector {
public:
    void select(pipeline::PageBatch& b) const override {
        for (size_t i = 0; i < b.count; ++i)
            if (b.pfn(i) % 3) b.keep[i] = 0;
    }
};

// Pages lent by ReadRecorder::lend_entries.
struct Loan final : LentPages {
    std::vector<std::byte> bytes;
    std::vector<uint8_t> bad;
    const std::byte* page(size_t i) const override { return bad[i] ? nullptr : bytes.data() + i * 4096; }
};

// Records the pfn of every page the pass reads (read_pages) or borrows
// (lend_entries, when `lends`).
class ReadRecorder final : public BatchedSource {
public:
    using BatchedSource::BatchedSource;
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> bad) override {
        for (size_t i = 0; i < count; ++i) read.push_back(entries()[first + i].pfn);
        BatchedSource::read_pages(first, count, out, bad);
    }
    std::unique_ptr<LentPages> lend_entries(std::span<const PageEntry> list) override {
        if (!lends) return nullptr;
        auto loan = std::make_unique<Loan>();
        loan->bytes.resize(list.size() * 4096);
        loan->bad.resize(list.size());
        for (size_t j = 0; j < list.size(); ++j) {
            read.push_back(list[j].pfn);
            BatchedSource::read_pages(static_cast<size_t>(*index_of_pfn(list[j].pfn)), 1,
                                      std::span(loan->bytes).subspan(j * 4096, 4096), std::span(loan->bad).subspan(j, 1));
        }
        return loan;
    }
    bool lends = false;
    std::vector<uint64_t> read;
};

// A selector that decides by pfn (dump levels) selects as the batch is
// read: the pages it leaves out are neither read nor mapped, whether the
// source reads runs of kept pages or lends their mapping in one loan, and
// the output is that of the pass that reads every page and then selects.
TEST(Pipeline, PagesASelectorLeavesOutByPfnAreNeverRead) {
    TempDir dir;
    Guest g(GuestType::hvm, 3000);
    const Selectors sel;
    const ThirdAfterReading after;
    std::vector<uint64_t> want_unreadable;
    const auto want = encode_list(dir / "ref", g.source, &after, 1, nullptr, &want_unreadable);
    std::vector<uint64_t> thirds;
    for (uint64_t pfn : g.pfns)
        if (pfn % 3 == 0) thirds.push_back(pfn);
    for (bool lends : {false, true})
        for (unsigned threads : {1u, 2u}) {
            SCOPED_TRACE((lends ? "lent, " : "read, ") + std::to_string(threads) + " threads");
            ReadRecorder src(entries_for(g.pfns, GuestType::hvm));
            src.zero_pfns = g.source.zero_pfns;
            src.unreadable_pfns = g.source.unreadable_pfns;
            src.batch = g.source.batch;
            src.lends = lends;
            std::vector<uint64_t> unreadable;
            const auto bytes = encode_list(dir / ("t" + std::to_string(lends) + std::to_string(threads)), src,
                                           &sel.by_pfn, threads, nullptr, &unreadable);
            EXPECT_TRUE(bytes == want);
            EXPECT_EQ(unreadable, want_unreadable);
            EXPECT_EQ(src.read, thirds) << "read pages the selector left out, or not every kept page once";
        }
}

// The scan before a pass (VMCOREINFO for dump levels): every readable page
// once, in pfn order, with its bytes; unreadable pages are skipped.
TEST(Pipeline, ScanPagesSeesEveryReadablePageOnce) {
    Guest g(GuestType::pv, 3000);
    std::vector<uint64_t> want;
    for (uint64_t pfn : g.pfns)
        if (std::find(g.source.unreadable_pfns.begin(), g.source.unreadable_pfns.end(), pfn) ==
            g.source.unreadable_pfns.end())
            want.push_back(pfn);
    std::vector<uint64_t> seen;
    std::vector<std::byte> page(4096);
    std::vector<uint8_t> bad(1);
    pipeline::scan_pages(g.source, [&](uint64_t pfn, std::span<const std::byte> bytes) {
        seen.push_back(pfn);
        g.source.read_pages(static_cast<size_t>(*g.source.index_of_pfn(pfn)), 1, page, bad);
        EXPECT_EQ(bytes.size(), 4096u);
        EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), page.begin())) << "pfn " << pfn;
        return true;
    });
    EXPECT_EQ(seen, want);
}

TEST(Pipeline, V1EncoderRefusesASelectionThatDropsPages) {
    TempDir dir;
    Guest g(GuestType::pv, 600);
    writer::V1Encoder encoder(g.spec, g.source, true, false, "v1");
    UniqueFd fd(::open((dir / "d").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    io::Sink sink(fd.get(), true, true, "d");
    const pipeline::ZeroPageSelector zeros;
    EXPECT_THROW(pipeline::run({g.source, &zeros, {}, encoder}, sink, WriteOptions{}), Error);
}

// A source that fails on its third batch.
class FailingSource final : public BatchedSource {
public:
    using BatchedSource::BatchedSource;
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> bad) override {
        if (++calls == 3) throw Error("the source broke", "test source", first);
        BatchedSource::read_pages(first, count, out, bad);
    }
    int calls = 0;
};

TEST(Pipeline, AnErrorOfTheSourceEndsThePassOnEveryThreadCount) {
    TempDir dir;
    for (unsigned threads : {1u, 2u, 4u}) {
        FailingSource source(entries_for(pfns_with_holes(5000), GuestType::pv));
        source.batch = 256;
        WriteOptions opt;
        opt.threads = threads;
        const auto path = dir / ("f" + std::to_string(threads));
        try {
            write_dump_file(path, make_spec(GuestType::pv, 8, 1), source, opt);
            ADD_FAILURE() << "no error with " << threads << " threads";
        } catch (const Error& e) {
            EXPECT_EQ(e.message(), "the source broke");
        }
        EXPECT_FALSE(std::filesystem::exists(path));
    }
}

}  // namespace
}  // namespace xendump::test
