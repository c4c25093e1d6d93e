// Issue 33 item 2: the encrypting output under io::Sink. The same calls on
// a plain Sink and on one encrypted to a fresh identity give the same
// bytes once decrypted: placeholders (reserve, hold) rewritten later, holes,
// writes ahead, an empty file, chunk boundaries, a pipe. A chunk is sealed
// once: rewriting one already sealed, or bytes never declared as a
// placeholder, is an internal error; copy_from is refused; memory stays a
// few chunks for a compact file's pattern (descriptors filled in order).
// The sealed temporary files hold no plaintext and read back what was written.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "age/age.hpp"
#include "age_write_helpers.hpp"
#include "io/encrypting_output.hpp"
#include "io/sealed_temp_file.hpp"
#include "io/sink.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::test::agewrite {
namespace {

namespace fs = std::filesystem;
using age::kChunkSize;

std::vector<std::byte> bytes_of(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::byte> b(n);
    for (auto& x : b) x = static_cast<std::byte>(rng());
    return b;
}

// What a test does to a Sink.
using Script = std::function<void(io::Sink&)>;

std::vector<std::byte> run_plain(const fs::path& p, const Script& script) {
    UniqueFd fd(::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    io::Sink sink(fd.get(), true, true, p.string());
    script(sink);
    sink.finish();
    return slurp(p);
}

// The plaintext of the age file written by `script` (decrypted with our
// Decryptor), its chunks sealed on `threads` threads.
std::vector<std::byte> run_encrypted(const fs::path& p, const Script& script, uint64_t* file_size = nullptr,
                                     unsigned threads = 1) {
    const age::Identity id = age::Identity::generate();
    const std::vector<age::Recipient> to{id.recipient()};
    {
        UniqueFd fd(::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        io::Sink sink(fd.get(), true, true, p.string(), to, threads);
        EXPECT_TRUE(sink.encrypted());
        script(sink);
        sink.finish();
        if (file_size) *file_size = sink.file_size();
    }
    EXPECT_TRUE(starts_with_age_magic(p));
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    age::Decryptor d(fd.get(), p.string(), std::span(&id, 1));
    std::vector<std::byte> out(d.size());
    EXPECT_EQ(d.read(0, std::span(reinterpret_cast<uint8_t*>(out.data()), out.size())), out.size());
    return out;
}

// Sealed on the caller's thread and on a pool of 3 (issue 33's parallel sealing).
void expect_same(const Script& script) {
    TempDir dir;
    const auto plain = run_plain(dir / "plain", script);
    for (unsigned threads : {1u, 3u}) {
        SCOPED_TRACE("threads " + std::to_string(threads));
        uint64_t size = 0;
        const auto decrypted = run_encrypted(dir / "enc", script, &size, threads);
        EXPECT_EQ(decrypted.size(), plain.size());
        EXPECT_TRUE(decrypted == plain);
        EXPECT_EQ(size, fs::file_size(dir / "enc"));
    }
}

TEST(EncryptingSink, StreamOfEverySize) {
    for (size_t n : {size_t{0}, size_t{1}, kChunkSize - 1, kChunkSize, kChunkSize + 1, 3 * kChunkSize + 5}) {
        SCOPED_TRACE(n);
        const auto data = bytes_of(n, static_cast<uint32_t>(n));
        expect_same([&](io::Sink& s) {
            // In pieces that cross chunk boundaries.
            for (size_t at = 0; at < n; at += 7001) s.write(std::span(data).subspan(at, std::min<size_t>(7001, n - at)));
        });
    }
}

TEST(EncryptingSink, ZerosBecomeEncryptedZeros) {
    const auto data = bytes_of(5000, 1);
    expect_same([&](io::Sink& s) {
        s.write(data);
        s.zeros(5 * kChunkSize + 123);  // a hole in the plain file
        s.write(data);
        s.zeros(kChunkSize);  // a trailing hole
    });
}

// A compact file's pattern (kdump/encoder.cpp): the head, bitmaps and
// descriptors reserved, the pages streamed, descriptors filled as they go,
// the head last; a reserved byte never written stays zero.
TEST(EncryptingSink, ReservedHeadFilledAfterThePages) {
    const auto pages = bytes_of(9 * kChunkSize + 77, 2);
    const uint64_t reserved = 4 * kChunkSize + 300, descs = kChunkSize + 1000;
    const auto desc = bytes_of(reserved - descs, 3);
    const auto head = bytes_of(900, 4);
    expect_same([&](io::Sink& s) {
        s.reserve(reserved);
        const uint64_t step = 50000;
        for (uint64_t at = 0, k = 0; at < pages.size(); at += step, ++k) {
            s.write(std::span(pages).subspan(at, std::min<uint64_t>(step, pages.size() - at)));
            const uint64_t lo = k * 40000;
            if (lo < desc.size())
                s.write_at(descs + lo, std::span(desc).subspan(lo, std::min<uint64_t>(40000, desc.size() - lo)));
        }
        s.write_at(0, head);  // bytes 900..descs stay zeros
    });
}

// The v1 pattern (writer/v1_encoder.cpp): the head written with room that
// finish() may patch (hold), digests written ahead and passed over.
TEST(EncryptingSink, HeldHeadAndWritesAhead) {
    const auto head = bytes_of(3 * kChunkSize + 10, 5);
    const auto pages = bytes_of(6 * kChunkSize, 6);
    const auto ahead = bytes_of(kChunkSize + 99, 7);
    const auto patch = bytes_of(4000, 8);
    expect_same([&](io::Sink& s) {
        s.hold(kChunkSize - 2000, 4000);  // across a chunk boundary
        s.hold(56, 2);
        s.write(head);
        const uint64_t ahead_at = head.size() + pages.size() + 4096;
        s.write_ahead(ahead_at, std::span(ahead).first(5000));
        s.write_ahead(ahead_at + 5000, std::span(ahead).subspan(5000));
        s.write(pages);
        s.zeros(4096);
        s.skip_written(ahead.size());
        s.write(std::span(patch).first(100));
        s.write_at(kChunkSize - 2000, patch);
        s.write_at(56, std::span(patch).first(2));
    });
}

TEST(EncryptingSink, ThroughAPipe) {
    const age::Identity id = age::Identity::generate();
    const std::vector<age::Recipient> to{id.recipient()};
    const auto data = bytes_of(2 * kChunkSize + 5, 9);
    const auto got = through_pipe([&](int fd) {
        io::Sink sink(fd, false, true, "pipe", to);
        sink.write(data);
        sink.zeros(100);
        sink.finish();
    });
    TempDir dir;
    {
        UniqueFd out(::open((dir / "p.age").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
        ASSERT_EQ(::write(out.get(), got.data(), got.size()), static_cast<ssize_t>(got.size()));
    }
    UniqueFd fd(::open((dir / "p.age").c_str(), O_RDONLY | O_CLOEXEC));
    age::Decryptor d(fd.get(), "p.age", std::span(&id, 1));
    ASSERT_EQ(d.size(), data.size() + 100);
    std::vector<std::byte> back(d.size());
    d.read(0, std::span(reinterpret_cast<uint8_t*>(back.data()), back.size()));
    EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin()));
}

// A Sink over a fresh file, encrypted to a fresh identity.
struct EncryptedFile {
    explicit EncryptedFile(unsigned threads = 1) : s(fd.get(), true, true, (dir / "f").string(), to, threads) {}
    TempDir dir;
    std::vector<age::Recipient> to{age::Identity::generate().recipient()};
    UniqueFd fd{::open((dir / "f").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
    io::Sink s;
};

class SealThreads : public ::testing::TestWithParam<unsigned> {};
INSTANTIATE_TEST_SUITE_P(EncryptingSink, SealThreads, ::testing::Values(1u, 4u));

TEST_P(SealThreads, RewritingASealedChunkIsAnInternalError) {
    EncryptedFile f(GetParam());
    io::Sink& s = f.s;
    const auto data = bytes_of(3 * kChunkSize, 10);
    s.write(data);  // chunks 0 and 1 are sealed (something lies past them)
    try {
        s.write_at(10, std::span(data).first(4));
        FAIL() << "rewrote a sealed chunk";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("internal error"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("sealed already"), std::string::npos) << e.what();
        EXPECT_EQ(e.offset(), 10u);
    }
    // The last chunk is not sealed yet, but its bytes were never a placeholder.
    EXPECT_THROW(s.write_at(2 * kChunkSize + 5, std::span(data).first(4)), Error);
}

TEST_P(SealThreads, APlaceholderIsFilledOnce) {
    EncryptedFile f(GetParam());
    io::Sink& s = f.s;
    const auto data = bytes_of(100, 11);
    s.reserve(1000);
    s.write(data);
    s.write_at(10, std::span(data).first(20));
    EXPECT_THROW(s.write_at(15, std::span(data).first(4)), Error);  // filled already
    s.write_at(100, std::span(data).first(4));                      // still reserved
}

TEST(EncryptingSink, CopyFromIsRefused) {
    EncryptedFile f;
    io::Sink& s = f.s;
    const auto src_bytes = bytes_of(8192, 12);
    {
        UniqueFd w(::open((f.dir / "src").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
        ASSERT_EQ(::write(w.get(), src_bytes.data(), src_bytes.size()), 8192);
    }
    UniqueFd src(::open((f.dir / "src").c_str(), O_RDONLY | O_CLOEXEC));
    EXPECT_FALSE(s.copy_from(src.get(), 0, 8192));
    EXPECT_EQ(s.offset(), 0u);
    EXPECT_FALSE(s.holes());
}

// The room a file may take is counted on the ciphertext (Sink::ask_room).
TEST(EncryptingSink, RoomCountsTheEncryptedFile) {
    EncryptedFile f;
    io::Sink& s = f.s;
    const uint64_t planned = 40 * kChunkSize;
    uint64_t granted = 0, wanted_first = 0;
    s.ask_room(
        [&](uint64_t, uint64_t needed, uint64_t wanted) {
            if (!wanted_first) wanted_first = wanted;
            granted = std::max(granted, needed);
            return needed;
        },
        planned);
    const auto data = bytes_of(planned, 13);
    s.write(data);
    s.finish();
    EXPECT_GE(wanted_first, s.file_size());  // the plan in ciphertext bytes
    struct stat st {};
    ASSERT_EQ(::fstat(f.fd.get(), &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), s.file_size());
    EXPECT_GE(granted, s.file_size() - kChunkSize);  // granted as it grew, up to about the whole
}

// Memory: a compact file's descriptors filled in order keep a few chunks,
// whatever the reserved region's size: the head's (filled last), the
// descriptors' being filled, the one where they meet the pages, the
// stream's, and one being sealed.
TEST(EncryptingOutput, DescriptorsInOrderKeepFewChunks) {
    const std::vector<age::Recipient> to{age::Identity::generate().recipient()};
    uint64_t emitted = 0;
    io::EncryptingOutput out(to, [&](uint64_t, std::span<const uint8_t> b) { emitted += b.size(); }, "mem");
    out.begin();
    const uint64_t desc_region = 50 * kChunkSize;  // 3.1 MiB of descriptors
    out.reserve(0, desc_region + 4096);
    const std::vector<std::byte> page(256, std::byte{1});  // pages compressed well
    const std::vector<std::byte> descs(24 * 64, std::byte{2});  // 64 pages' descriptors per batch
    uint64_t at = desc_region + 4096, d = 4096;
    while (d + descs.size() <= desc_region + 4096) {
        for (int i = 0; i < 64; ++i) {
            out.put(at, page.data(), page.size());
            at += page.size();
        }
        out.rewrite(d, descs);
        d += descs.size();
        EXPECT_LE(out.pending_chunks(), 5u);
    }
    out.finish(at);
    EXPECT_LE(out.peak_pending_chunks(), 5u);
    EXPECT_EQ(out.pending_chunks(), 0u);
    EXPECT_EQ(emitted, out.file_size(at));
}

// The writes of one sequence of calls, sealed on 1 and on several threads:
// the same chunks at the same offsets (cut into chunks: runs of consecutive
// chunks are written at once), in the same order for an in-order output,
// in any order for a positional one, every one sealed once (the Encryptor
// refuses a second time), decrypting to the same bytes. The file has many
// more chunks than the pool has slots, a reserved head filled last (a
// compact file) and a held range (a v1 head).
TEST(EncryptingOutput, SameWritesAndBytesForAnyNumberOfThreads) {
    const age::Identity id = age::Identity::generate();
    const std::vector<age::Recipient> to{id.recipient()};
    const auto pages = bytes_of(200 * kChunkSize + 4321, 21);
    const auto head = bytes_of(3 * kChunkSize + 17, 22);
    TempDir dir;
    struct Run {
        std::vector<std::pair<uint64_t, uint64_t>> writes;  // (offset, size) in order, cut at chunk ends
        std::vector<std::byte> plain;
        size_t slots = 0;
    };
    using Placing = io::EncryptingOutput::Placing;
    auto run = [&](unsigned threads, Placing placing) {
        Run r;
        const fs::path p = dir / ("t" + std::to_string(threads));
        UniqueFd fd(::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        std::mutex m;  // positional: emits from the sealing threads
        {
            io::EncryptingOutput out(
                to,
                [&](uint64_t at, std::span<const uint8_t> b) {
                    std::lock_guard lock(m);
                    // The head, then sealed chunks at their places, cut at the chunks' ends.
                    const uint64_t head_end = r.writes.empty() ? at + b.size() : r.writes.front().second;
                    for (uint64_t o = at, end = at + b.size(); o < end;) {
                        const uint64_t next =
                            o < head_end ? head_end
                                         : head_end + ((o - head_end) / age::kSealedChunkSize + 1) * age::kSealedChunkSize;
                        r.writes.emplace_back(o, std::min(next, end) - o);
                        o = std::min(next, end);
                    }
                    ASSERT_EQ(::pwrite(fd.get(), b.data(), b.size(), static_cast<off_t>(at)),
                              static_cast<ssize_t>(b.size()));
                },
                p.string(), threads, placing);
            r.slots = out.seal_slots();
            out.begin();
            out.reserve(0, head.size());
            out.hold(head.size(), 100);
            out.put(head.size(), pages.data(), 100);
            // Pieces within a chunk and runs of whole chunks sealed from the caller's bytes.
            const uint64_t steps[] = {30000, 9 * kChunkSize + 123, 70000, 40 * kChunkSize};
            for (uint64_t at = 100, i = 0; at < pages.size(); at += steps[i++ % 4])
                out.put(head.size() + at, pages.data() + at, std::min<uint64_t>(steps[i % 4], pages.size() - at));
            out.rewrite(0, head);
            out.rewrite(head.size(), std::span(pages).first(100));
            out.finish(head.size() + pages.size());
            EXPECT_EQ(out.pending_chunks(), 0u);
        }
        UniqueFd in(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
        age::Decryptor d(in.get(), p.string(), std::span(&id, 1));
        r.plain.resize(d.size());
        EXPECT_EQ(d.read(0, std::span(reinterpret_cast<uint8_t*>(r.plain.data()), r.plain.size())), r.plain.size());
        return r;
    };
    using Out = io::EncryptingOutput;
    const Run one = run(1, Placing::in_order);
    EXPECT_EQ(one.slots, Out::kChunksPerJob);
    ASSERT_EQ(one.plain.size(), head.size() + pages.size());
    EXPECT_TRUE(std::equal(head.begin(), head.end(), one.plain.begin()));
    EXPECT_TRUE(std::equal(pages.begin(), pages.end(), one.plain.begin() + static_cast<std::ptrdiff_t>(head.size())));
    auto sorted = one.writes;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_TRUE(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());  // each place written once
    for (Placing placing : {Placing::in_order, Placing::positional})
        for (unsigned threads : {1u, 2u, 4u, 7u}) {
            SCOPED_TRACE("threads " + std::to_string(threads) + (placing == Placing::positional ? ", positional" : ""));
            const Run n = run(threads, placing);
            // No more sealing threads than the machine has CPUs.
            const unsigned used = std::min(threads, std::max(1u, std::thread::hardware_concurrency()));
            EXPECT_EQ(n.slots, used > 1 ? (used + 1) * Out::kSlotsPerThread * Out::kChunksPerJob : Out::kChunksPerJob);
            if (placing == Placing::in_order) {
                EXPECT_EQ(n.writes, one.writes);
            } else {
                auto w = n.writes;
                std::sort(w.begin(), w.end());
                EXPECT_EQ(w, sorted);
            }
            EXPECT_TRUE(n.plain == one.plain);
        }
}

// Chunks sealed ahead (seal_ahead, as a v1 batch's pages on the pipeline's
// workers) from other threads, in any order, then put by the caller: the
// same file as when put() seals them, byte for byte (the same chunks at the
// same places), on a positional output; on an in-order one nothing is
// sealed ahead. A put over part of a chunk sealed ahead, bytes sealed
// ahead and never put, and a last chunk sealed ahead (as not the last) are
// internal errors, never a chunk sealed twice.
TEST(EncryptingOutput, ChunksSealedAheadOnOtherThreadsGiveTheSameFile) {
    using Out = io::EncryptingOutput;
    const age::Identity id = age::Identity::generate();
    const std::vector<age::Recipient> to{id.recipient()};
    const uint64_t head = 3 * 4096, batch = 512 * 4096, nr = 9;  // pages at 12 KiB: chunks straddle batches
    const auto pages = bytes_of(nr * batch, 31);
    const auto tail = bytes_of(70000, 32);
    TempDir dir;
    auto run = [&](bool ahead, Out::Placing placing) {
        const fs::path p = dir / (ahead ? "ahead" : "put");
        UniqueFd fd(::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        std::mutex m;
        std::vector<std::pair<uint64_t, uint64_t>> writes;
        Out out(
            to,
            [&](uint64_t at, std::span<const uint8_t> b) {
                std::lock_guard lock(m);
                writes.emplace_back(at, b.size());
                EXPECT_EQ(::pwrite(fd.get(), b.data(), b.size(), static_cast<off_t>(at)), static_cast<ssize_t>(b.size()));
            },
            p.string(), 2, placing);
        EXPECT_EQ(out.seals_ahead(), placing == Out::Placing::positional);
        out.begin();
        out.hold(0, 100);
        const std::vector<std::byte> h(head, std::byte{7});
        out.put(0, h.data(), h.size());
        // Batches sealed ahead two at a time on two threads (the later one
        // first), a page's iovec each, in steps as the hashing goes.
        for (uint64_t k = 0; k < nr; k += 2) {
            auto seal = [&](uint64_t b) {
                if (!ahead || b >= nr) return;
                std::vector<iovec> iov;
                for (uint64_t i = 0; i < batch; i += 4096)
                    iov.push_back({const_cast<std::byte*>(pages.data() + b * batch + i), 4096});
                Out::AheadRun sealed;
                const uint64_t at = head + b * batch;
                uint64_t from = at;
                for (uint64_t end = at + 5 * 4096; end < at + batch + 5 * 4096; end += 5 * 4096)
                    from = out.seal_ahead(at, iov, from, end, sealed);
                out.flush_ahead(sealed);
            };
            std::thread t1([&] { seal(k + 1); }), t2([&] { seal(k); });
            t1.join();
            t2.join();
            for (uint64_t b = k; b < std::min(k + 2, nr); ++b) {
                std::vector<iovec> iov{{const_cast<std::byte*>(pages.data() + b * batch), batch}};
                out.put(head + b * batch, iov);
            }
        }
        out.put(head + nr * batch, tail.data(), tail.size());
        out.finish(head + nr * batch + tail.size());
        EXPECT_EQ(out.pending_chunks(), 0u);
        std::sort(writes.begin(), writes.end());
        UniqueFd in(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
        age::Decryptor d(in.get(), p.string(), std::span(&id, 1));
        std::vector<std::byte> plain(d.size());
        EXPECT_EQ(d.read(0, std::span(reinterpret_cast<uint8_t*>(plain.data()), plain.size())), plain.size());
        EXPECT_TRUE(std::equal(pages.begin(), pages.end(), plain.begin() + static_cast<std::ptrdiff_t>(head)));
        EXPECT_TRUE(std::equal(tail.begin(), tail.end(), plain.end() - static_cast<std::ptrdiff_t>(tail.size())));
        return std::make_pair(plain, slurp(p).size());
    };
    const auto by_put = run(false, Out::Placing::positional);
    const auto by_ahead = run(true, Out::Placing::positional);
    EXPECT_TRUE(by_ahead.first == by_put.first);
    EXPECT_EQ(by_ahead.second, by_put.second);
    const auto in_order = run(true, Out::Placing::in_order);
    EXPECT_TRUE(in_order.first == by_put.first);

    // Misuse: an internal Error each time.
    const auto data = bytes_of(8 * kChunkSize, 33);
    auto output = [&] {
        return std::make_unique<Out>(to, [](uint64_t, std::span<const uint8_t>) {}, "mem", 1, Out::Placing::positional);
    };
    const iovec all{const_cast<std::byte*>(data.data()), data.size()};
    {
        auto out = output();
        out->begin();
        Out::AheadRun run;
        EXPECT_EQ(out->seal_ahead(0, std::span(&all, 1), 0, 3 * kChunkSize, run), 3 * kChunkSize);
        out->flush_ahead(run);
        EXPECT_THROW(out->put(0, data.data(), kChunkSize + 5), Error);  // chunk 1 in part
    }
    {
        auto out = output();
        out->begin();
        Out::AheadRun run;
        out->seal_ahead(0, std::span(&all, 1), kChunkSize, 3 * kChunkSize, run);  // chunks 1, 2
        out->flush_ahead(run);
        out->put(0, data.data(), 2 * kChunkSize);  // chunk 2 never put
        EXPECT_THROW(out->finish(2 * kChunkSize), Error);
    }
    {
        auto out = output();
        out->begin();
        Out::AheadRun run;
        out->seal_ahead(0, std::span(&all, 1), 0, 2 * kChunkSize, run);  // chunk 1: the last after all
        out->flush_ahead(run);
        out->put(0, data.data(), 2 * kChunkSize);
        EXPECT_THROW(out->finish(2 * kChunkSize), Error);
    }
}

// A write that fails (a full disk) while chunks are sealed on other
// threads is an Error from the call that wrote, naming the failed write's
// offset; nothing is written once the call has returned (in order: nothing
// after the failed write); the pool's threads end with the output.
TEST(EncryptingOutput, AWriteErrorWithChunksInFlightReachesTheCaller) {
    using Out = io::EncryptingOutput;
    const std::vector<age::Recipient> to{age::Identity::generate().recipient()};
    const auto data = bytes_of(100 * kChunkSize, 23);
    for (Out::Placing placing : {Out::Placing::in_order, Out::Placing::positional}) {
        SCOPED_TRACE(placing == Out::Placing::positional ? "positional" : "in order");
        std::atomic<size_t> written = 0, after_error = 0, after_return = 0;
        std::atomic<bool> failed = false, returned = false;
        uint64_t fail_at = 0;  // the third write: the head, chunks 0-3, chunks 4-7 (in order)
        {
            Out out(
                to,
                [&](uint64_t at, std::span<const uint8_t>) {
                    if (returned) ++after_return;
                    if (failed && placing == Out::Placing::in_order) ++after_error;
                    if (at == fail_at) {
                        failed = true;
                        throw Error("write failed", "mem", at, ENOSPC);
                    }
                    ++written;
                },
                "mem", 4, placing);
            fail_at = out.file_offset(Out::kChunksPerJob * kChunkSize);
            out.begin();
            try {
                out.put(0, data.data(), data.size());
                out.finish(data.size());
                ADD_FAILURE() << "the write error was lost";
            } catch (const Error& e) {
                returned = true;
                EXPECT_EQ(e.offset(), fail_at);
            }
        }
        if (placing == Out::Placing::in_order) {
            EXPECT_EQ(written, 2u);  // the head, chunks 0-3
        }
        EXPECT_EQ(after_error, 0u);
        EXPECT_EQ(after_return, 0u);
    }
}

TEST(SealedTempFile, ReadsBackWhatWasWrittenAndHoldsNoPlaintext) {
    TempDir dir;
    ASSERT_EQ(::setenv("TMPDIR", dir.path().c_str(), 1), 0);
    const std::string marker = "SEALED-TEMP-MARKER-5b1f0c";
    std::vector<std::byte> data(3 * io::SealedTempFile::kBlock + 100);
    for (size_t i = 0; i + marker.size() <= data.size(); i += 512) std::memcpy(&data[i], marker.data(), marker.size());
    {
        io::SealedTempFile f("a test");
        f.write(1000, data.data(), data.size());
        f.write(1500, marker.data(), marker.size());  // a rewrite inside a block
        std::memcpy(&data[500], marker.data(), marker.size());
        std::vector<std::byte> back(data.size() + 2000);
        f.read(0, back.data(), back.size());
        EXPECT_TRUE(std::all_of(back.begin(), back.begin() + 1000, [](std::byte b) { return b == std::byte{0}; }));
        EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin() + 1000));
        EXPECT_EQ(f.size(), 1000 + data.size());
        EXPECT_TRUE(files_with_marker({dir.path()}, marker).empty());
    }
    ::unsetenv("TMPDIR");
}

}  // namespace
}  // namespace xendump::test::agewrite
