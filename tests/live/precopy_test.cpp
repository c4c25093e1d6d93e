// Consistent live dumps by pre-copy on the simulated host (issue 35, steps
// 2 and 3): images of one instant of a guest writing at several rates and
// patterns, the torn image of --live=inconsistent caught by the same check,
// the policy, every refusal with its reason, log-dirty off after an error
// or a cancel, the same bytes for any thread count.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "dump/precopy.hpp"
#include "hv/forwarding_hypervisor.hpp"
#include "live_support.hpp"
#include "pipeline/read_behind.hpp"
#include "stream_hash.hpp"
#include "xendump/fd.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::test::live {
namespace {

using test::sim::Host;

constexpr uint64_t kPages = 4096;  // 16 MiB

DumpOptions precopy_options(unsigned threads = 1) {
    DumpOptions o;
    o.precopy.on = true;
    // Far above what a 16 MiB guest's pages take: the policy pauses at the
    // first CLEAN whatever the machine's speed (the rounds are counted, not timed).
    o.precopy.max_pause = std::chrono::seconds(30);
    o.write.threads = threads;
    return o;
}

void expect_verified(const std::filesystem::path& file) {
    for (const auto& f : DumpReader::open(file).verify()) ADD_FAILURE() << f.check << ": " << f.message;
}

// Every writer rate and pattern: the image is one instant of the writer.
TEST(Precopy, ConsistentUnderWriters) {
    uint32_t domid = 20;
    for (const char* type : {"hvm", "pvh"}) {
        for (const char* pattern : {"sequential", "random", "hot"}) {
            for (uint64_t rate : {20u, 250u, 1500u}) {
                SCOPED_TRACE(std::string(type) + " " + pattern + " rate " + std::to_string(rate));
                const json d = guest(domid, type, kPages, rate, pattern);
                Host host(host_spec({d}));
                const auto file = host.tmp / "live.core";
                DumpOptions o = precopy_options();
                o.precopy.max_pause = std::chrono::microseconds(1);  // never fits: rounds until they stop
                o.precopy.max_rounds = 3;
                const DumpResult r = dump_domain_to_file(*host.hv, domid, file, o);
                ASSERT_TRUE(r.live);
                EXPECT_LE(r.live->rounds, 3u);
                EXPECT_GT(r.live->pages_recopied, 0u);
                const Instant i = check_instant(file, writer_of(d));
                EXPECT_TRUE(i.consistent()) << i.torn << " torn pages of " << i.pages_checked;
                EXPECT_GT(i.written, 0u);
                // The instant is the pause: the writer made no write after it.
                const json info = sim_info(host, domid);
                EXPECT_FALSE(info.at("logdirty").get<bool>());
                EXPECT_FALSE(info.at("paused").get<bool>());
                expect_verified(file);
                expect_live_record(DumpReader::open(file), r);
                ++domid;
            }
        }
    }
}

// Each pre-copy round is reported to the caller (xen-dumpd's bar, the
// service's status): its number and the pages dirtied, the last one as the
// paused round; the counts match what the dump records.
TEST(Precopy, EachRoundIsReportedAsProgress) {
    const json d = guest(40, "hvm", kPages, 250, "random");
    Host host(host_spec({d}));
    DumpOptions o = precopy_options();
    o.precopy.max_pause = std::chrono::microseconds(1);  // never fits: rounds until they stop
    o.precopy.max_rounds = 3;
    std::vector<WriteProgress> rounds;
    o.write.on_progress = [&](const WriteProgress& p) {
        if (p.live_round) rounds.push_back(p);
    };
    const DumpResult r = dump_domain_to_file(*host.hv, 40, host.tmp / "live.core", o);
    ASSERT_TRUE(r.live);
    ASSERT_EQ(rounds.size(), r.live->rounds + 1u) << "a report a round, and one for the paused round";
    for (size_t i = 0; i < rounds.size(); ++i) {
        EXPECT_EQ(rounds[i].live_round, i + 1);
        EXPECT_GT(rounds[i].dirty_pages, 0u) << "round " << i + 1;
        EXPECT_EQ(rounds[i].live_final, i + 1 == rounds.size()) << "round " << i + 1;
        EXPECT_FALSE(rounds[i].finding_pages);
    }
}

// A hypervisor that will not map some frames while the guest runs (`always`:
// paused or not), as real Xen refused a few hundred pages of a running PVH
// guest in the lab's first live dump.
class RefusingWhileRunning : public PauseTracking {
public:
    RefusingWhileRunning(Hypervisor& inner, std::set<uint64_t> frames, bool always)
        : PauseTracking(inner), frames_(std::move(frames)), always_(always) {}
    std::unique_ptr<ForeignMapping> map_foreign(uint32_t domid, std::span<const uint64_t> frames) override {
        struct Refusing : ForeignMapping {
            std::unique_ptr<ForeignMapping> inner;
            std::vector<bool> refused;
            size_t count() const override { return inner->count(); }
            const std::byte* page(size_t i) const override { return refused[i] ? nullptr : inner->page(i); }
            int error(size_t i) const override { return refused[i] ? EINVAL : inner->error(i); }
        };
        auto m = std::make_unique<Refusing>();
        m->inner = ForwardingHypervisor::map_foreign(domid, frames);
        for (uint64_t f : frames) {
            const bool refuse = frames_.count(f) && (always_ || !paused());
            m->refused.push_back(refuse);
            refusals += refuse;
        }
        return m;
    }
    uint64_t refusals = 0;

private:
    std::set<uint64_t> frames_;
    bool always_;
};

// Pages the running guest's hypervisor would not map are read again under
// the pause: the image is whole and consistent, nothing listed unreadable.
// Pages it refuses paused too are listed, and only those.
TEST(Precopy, PagesRefusedWhileTheGuestRunsAreReadInThePause) {
    for (bool always : {false, true}) {
        SCOPED_TRACE(always ? "refused paused too" : "refused while running");
        const uint32_t domid = always ? 42 : 41;
        const json d = guest(domid, "hvm", kPages, 20, "random");
        Host host(host_spec({d}));
        std::set<uint64_t> refused;
        for (uint64_t pfn = 0x200; pfn < 0x210; ++pfn) refused.insert(pfn);
        RefusingWhileRunning hv(*host.hv, refused, always);
        const auto file = host.tmp / "live.core";
        const DumpResult r = dump_domain_to_file(hv, domid, file, precopy_options());
        ASSERT_TRUE(r.live);
        EXPECT_GT(hv.refusals, 0u);
        if (always) {
            EXPECT_EQ(std::set<uint64_t>(r.unreadable_pfns.begin(), r.unreadable_pfns.end()), refused);
            continue;
        }
        EXPECT_TRUE(r.unreadable_pfns.empty()) << r.unreadable_pfns.size() << " pages listed unreadable";
        const Instant i = check_instant(file, writer_of(d));
        EXPECT_TRUE(i.consistent()) << i.torn << " torn pages of " << i.pages_checked;
        EXPECT_EQ(i.pages_checked, kPages - 16 - 0x20);  // the writer's pages but the VGA hole's
        expect_verified(file);
    }
}

// The same check fails on a dump that never pauses: it can tell.
TEST(Precopy, InconsistentDumpIsTorn) {
    // Random writes: some land on pages copied already (the image holds an
    // older write of them), some on pages copied later (a newer one). A
    // sequential writer slower than the copy only writes behind it: its
    // image is the instant before its first write, consistent by chance.
    const json d = guest(40, "hvm", kPages, 250, "random");
    Host host(host_spec({d}));
    const auto file = host.tmp / "torn.core";
    DumpOptions o;
    o.live = true;
    const DumpResult r = dump_domain_to_file(*host.hv, 40, file, o);
    EXPECT_FALSE(r.live);
    const Instant i = check_instant(file, writer_of(d));
    EXPECT_FALSE(i.consistent());
    EXPECT_GT(i.torn, 0u);
    EXPECT_EQ(DumpReader::open(file).domain().get(keys::kLive).value_or(""), "inconsistent");
}

// --leave-paused: the guest stays paused at the dump's instant, so a paused
// dump of it afterwards holds the very same pages.
TEST(Precopy, LeftPausedEqualsPausedDump) {
    for (const char* type : {"hvm", "pv"}) {
        SCOPED_TRACE(type);
        const json d = guest(41, type, kPages, 250, "random");
        Host host(host_spec({d}, /*shadow_paging=*/true));
        const auto live_file = host.tmp / "live.core", paused_file = host.tmp / "paused.core";
        DumpOptions o = precopy_options();
        o.precopy.leave_paused = true;
        const DumpResult r = dump_domain_to_file(*host.hv, 41, live_file, o);
        ASSERT_TRUE(r.live);
        EXPECT_TRUE(r.live->left_paused);
        EXPECT_TRUE(sim_info(host, 41).at("paused").get<bool>());
        dump_domain_to_file(*host.hv, 41, paused_file, DumpOptions{});
        EXPECT_EQ(pages_differing(live_file, paused_file), 0u);
        DumpReader a = DumpReader::open(live_file), b = DumpReader::open(paused_file);
        auto va = a.vcpus(), vb = b.vcpus();
        ASSERT_EQ(va.size(), vb.size());
        for (size_t i = 0; i < va.size(); ++i) EXPECT_EQ(va[i].bytes, vb[i].bytes);
        EXPECT_TRUE(check_instant(live_file, writer_of(d), p2m_pfns(host, 41)).consistent());
        host.hv->unpause(41);
        EXPECT_FALSE(sim_info(host, 41).at("paused").get<bool>());
    }
}

// The pages, digests and table do not depend on the thread count.
TEST(Precopy, SameBytesForAnyThreads) {
    std::vector<std::vector<std::byte>> pages;
    std::vector<std::string> digests;
    for (unsigned threads : {1u, 2u, 5u}) {
        SCOPED_TRACE(threads);
        const json d = guest(42, "hvm", kPages, 300, "hot");
        Host host(host_spec({d}));
        const auto file = host.tmp / "t.core";
        const DumpResult r = dump_domain_to_file(*host.hv, 42, file, precopy_options(threads));
        ASSERT_TRUE(r.live);
        EXPECT_EQ(r.live->rounds, 0u);  // fits at once: the same instant every time
        expect_verified(file);
        DumpReader reader = DumpReader::open(file);
        std::vector<std::byte> all(reader.nr_pages() * 4096);
        reader.read_pages(0, reader.nr_pages(), all);
        pages.push_back(std::move(all));
        std::string text;
        for (const auto& [k, v] : reader.domain().items())
            if (k != keys::kTime && k != keys::kPauseUsec) text += k + "=" + v + "\n";
        digests.push_back(text);
    }
    for (size_t i = 1; i < pages.size(); ++i) {
        EXPECT_TRUE(pages[i] == pages[0]) << "pages differ with another thread count";
        EXPECT_EQ(digests[i], digests[0]);
    }
}

// The digests of every chunk are made again from the file after the final
// round: that reading is the read-back the check before publication gets
// (VerifyOptions::pages_read_back), so the check reads no chunk of
// .xen_pages again. It is the fold of the final file's own chunks, the
// same for any thread count; stored digests that do not fold to it are not
// proven by it.
TEST(Precopy, CheckBeforePublishReadsThePagesOnce) {
    std::vector<PagesReadBack> folds;
    for (unsigned threads : {1u, 2u, 5u}) {
        SCOPED_TRACE(threads);
        const json d = guest(44, "hvm", kPages, 300, "random");
        Host host(host_spec({d}));
        const auto file = host.tmp / "c.core";
        DumpOptions o = precopy_options(threads);
        PagesReadBack rb;
        std::vector<Finding> findings;
        bool drops = false;
        uint64_t reread = 0;
        o.write.check_before_publish = [&](const std::filesystem::path& p, const VerifyOptions& vo) {
            ASSERT_NE(vo.pages_read_back, nullptr);
            rb = *vo.pages_read_back;
            {
                UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
                ::fdatasync(fd.get());
                ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
            }
            drops = cached_pages(p, rb.pages_offset, rb.pages_size) == 0;
            findings = DumpReader::open(p).verify(vo);
            // Not chunk 0 nor the last: within the read-ahead of the headers and the trailer.
            reread = cached_pages(p, rb.pages_offset + rb.chunk_bytes, rb.pages_size - 2 * rb.chunk_bytes);
        };
        const DumpResult r = dump_domain_to_file(*host.hv, 44, file, o);
        ASSERT_TRUE(r.live);
        EXPECT_EQ(r.live->rounds, 0u);  // fits at once: the same instant every time
        EXPECT_TRUE(findings.empty()) << findings.front().check << ": " << findings.front().message;
        const DumpReader reader = DumpReader::open(file);
        EXPECT_EQ(rb.pages_offset, reader.pages_offset());
        EXPECT_EQ(rb.pages_size, reader.nr_pages() * 4096);
        EXPECT_EQ(rb.chunks, (reader.nr_pages() + 255) / 256);  // every chunk
        ASSERT_GT(rb.chunks, 2u);
        if (drops) {
            EXPECT_EQ(reread, 0u);
        }
        // The fold of the published file's chunks, the last (shorter) one too.
        std::vector<std::byte> pages(rb.pages_size);
        UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
        pipeline::read_back(fd.get(), pages.data(), pages.size(), rb.pages_offset, "c.core");
        ChunkedHash hash(rb.chunk_bytes);
        DigestFold fold;
        hash.update(pages.data(), pages.size(), [&](const XXH128_canonical_t& c) { fold.add(c); });
        if (hash.pending()) fold.add(hash.finish());
        const XXH128_canonical_t of_file = fold.digest();
        EXPECT_EQ(std::memcmp(&of_file, rb.digest_of_chunks.data(), sizeof of_file), 0);
        folds.push_back(rb);

        // A chunk changed since, with a read-back that does not fold to the
        // stored digests: every chunk is read, and the changed one is named.
        {
            std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(static_cast<std::streamoff>(rb.pages_offset + 2 * rb.chunk_bytes + 100));
            f.put('\x5a');
        }
        PagesReadBack wrong = rb;
        wrong.digest_of_chunks[0] ^= std::byte{1};
        VerifyOptions vo;
        vo.pages_read_back = &wrong;
        const auto changed = reader.verify(vo);
        ASSERT_EQ(changed.size(), 1u);
        EXPECT_EQ(changed[0].structure, "page chunk [2]");
    }
    for (size_t i = 1; i < folds.size(); ++i) EXPECT_EQ(folds[i].digest_of_chunks, folds[0].digest_of_chunks);
}

// Paused at the first CLEAN: what is copied in the pause is exactly what the
// writer dirtied during the pass (the pages it wrote, replayed).
TEST(Precopy, PauseCopiesWhatThePassLeftDirty) {
    const json d = guest(43, "pvh", kPages, 100, "random");
    Host host(host_spec({d}));
    const DumpResult r = dump_domain_to_file(*host.hv, 43, host.tmp / "p.core", precopy_options());
    ASSERT_TRUE(r.live);
    EXPECT_EQ(r.live->rounds, 0u);
    const auto w = writer_of(d);
    const uint64_t writes = sim_info(host, 43).at("writer_writes");
    std::set<uint64_t> dirty;
    for (uint64_t k = 0; k < writes; ++k) {
        const uint64_t pfn = w.first_pfn + xendump::sim::writer_target(w, k);
        if (pfn < 0xA0 || pfn >= 0xC0) dirty.insert(pfn);  // the VGA hole is not dumped
    }
    EXPECT_GT(dirty.size(), 0u);
    EXPECT_EQ(r.live->pages_in_pause, dirty.size());
    EXPECT_EQ(r.live->pages_recopied, dirty.size());
}

TEST(PrecopyPolicy, Decisions) {
    DumpOptions::Precopy p;
    p.max_pause = std::chrono::milliseconds(100);
    p.max_rounds = 5;
    using dump::PrecopyStep;
    // 10 000 pages a second: 1000 pages take 100 ms (fit), 1001 do not.
    EXPECT_EQ(dump::precopy_decision(p, 0, 1000, std::nullopt, 10000).step, PrecopyStep::pause);
    EXPECT_EQ(dump::precopy_decision(p, 0, 1001, std::nullopt, 10000).step, PrecopyStep::copy_live);
    EXPECT_STREQ(dump::precopy_decision(p, 0, 1000, std::nullopt, 10000).why, "fits");
    EXPECT_EQ(dump::precopy_decision(p, 2, 0, 5000, 1).step, PrecopyStep::pause);  // nothing left
    // Shrinking rounds go on up to max_rounds, then stop.
    EXPECT_EQ(dump::precopy_decision(p, 4, 5000, 6000, 10000).step, PrecopyStep::copy_live);
    EXPECT_STREQ(dump::precopy_decision(p, 5, 5000, 6000, 10000).why, "rounds");
    // A dirty set that does not shrink stops them.
    EXPECT_STREQ(dump::precopy_decision(p, 1, 6000, 6000, 10000).why, "not shrinking");
    p.max_rounds = 0;
    EXPECT_STREQ(dump::precopy_decision(p, 0, 5000, std::nullopt, 10000).why, "rounds");
    // What the pause costs besides its pages counts: 900 pages (90 ms) and
    // 10 ms of CLEAN and vcpu state fit 100 ms, 11 ms do not.
    p.max_rounds = 5;
    EXPECT_EQ(dump::precopy_decision(p, 0, 900, std::nullopt, 10000, 10000).step, PrecopyStep::pause);
    EXPECT_EQ(dump::precopy_decision(p, 0, 900, std::nullopt, 10000, 11000).step, PrecopyStep::copy_live);
}

// A round count the policy decides, not the clock: with a pause target no
// copy meets, the rounds stop at --live-rounds (or when they stop
// shrinking), and the image is still one instant.
TEST(PrecopyPolicy, RoundsBounded) {
    for (unsigned max : {0u, 1u, 4u}) {
        SCOPED_TRACE(max);
        const json d = guest(44, "hvm", kPages, 60, "sequential");
        Host host(host_spec({d}));
        DumpOptions o = precopy_options();
        o.precopy.max_pause = std::chrono::microseconds(1);
        o.precopy.max_rounds = max;
        std::vector<std::string> warnings;
        o.write.on_warning = [&](const std::string& w) { warnings.push_back(w); };
        const DumpResult r = dump_domain_to_file(*host.hv, 44, host.tmp / "r.core", o);
        ASSERT_TRUE(r.live);
        EXPECT_LE(r.live->rounds, max);
        bool warned = false;
        for (const auto& w : warnings) warned |= w.find("pre-copy stopped") != std::string::npos;
        // With a pause no copy fits in, the rounds end only when nothing is
        // left or with the warning that the pause may be long.
        if (!warned) {
            EXPECT_EQ(r.live->pages_in_pause, 0u);
        }
        if (max == 0) {
            EXPECT_TRUE(warned);
        }
        EXPECT_TRUE(check_instant(host.tmp / "r.core", writer_of(d)).consistent());
    }
}

// Each refusal: the reason, no file, log-dirty as it was.
TEST(PrecopyRefusals, SayWhy) {
    json pv = guest(50, "pv", kPages, 0, "");
    json passthrough = guest(51, "hvm", kPages, 0, "");
    passthrough["passthrough"] = true;
    json owned = guest(52, "hvm", kPages, 0, "");
    json plain = guest(53, "hvm", kPages, 0, "");
    Host host(host_spec({pv, passthrough, owned, plain}));
    auto migration = open_hypervisor(host.host());
    migration->enable_logdirty(52);
    struct Case {
        uint32_t domid;
        const char* reason;
        std::function<void(DumpOptions&)> tweak;
    } cases[] = {
        {50, "shadow paging", nullptr},
        {51, "passed-through PCI devices", nullptr},
        {52, "already on", nullptr},
        // (Compact, encrypted and streamed forms are made from an image:
        // precopy_forms_test.cpp.)
        {53, "consistent (pre-copy) or inconsistent", [](DumpOptions& o) { o.live = true; }},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.reason);
        DumpOptions o = precopy_options();
        if (c.tweak) c.tweak(o);
        const auto file = host.tmp / ("refused" + std::to_string(c.domid) + ".core");
        try {
            dump_domain_to_file(*host.hv, c.domid, file, o);
            ADD_FAILURE() << "dumped";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(c.reason), std::string::npos) << e.what();
        }
        EXPECT_FALSE(std::filesystem::exists(file));
        EXPECT_EQ(sim_info(host, c.domid).at("logdirty").get<bool>(), c.domid == 52);
        EXPECT_FALSE(sim_info(host, c.domid).at("paused").get<bool>());
    }
    // The command line says the same, in one line, and exits non-zero.
    RunResult r = run({"xen-dumpd", "--host", host.host(), "--domain", "50", "--live", "-o",
                       (host.tmp / "cli.core").string()});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("shadow paging"), std::string::npos) << r.err;
}

// An error or a cancel during the dump: log-dirty off, the guest running,
// nothing published.
TEST(PrecopyCleanup, ErrorAndCancel) {
    const json d = guest(60, "hvm", kPages, 200, "random");
    Host host(host_spec({d}));
    // The output exists: refused when the file is made, after log-dirty went on.
    const auto taken = host.tmp / "taken.core";
    std::ofstream(taken) << "x";
    EXPECT_THROW(dump_domain_to_file(*host.hv, 60, taken, precopy_options()), Error);
    EXPECT_FALSE(sim_info(host, 60).at("logdirty").get<bool>());
    // Cancelled in the middle of the pass, and in the rounds.
    for (int when : {1, 1000000}) {
        SCOPED_TRACE(when);
        std::atomic<bool> cancel{false};
        DumpOptions o = precopy_options();
        o.write.cancel = &cancel;
        if (when == 1) {
            o.write.on_progress = [&](const WriteProgress&) { cancel = true; };  // after the first batch
        } else {
            // After the rounds, just before the pause: the policy's warning
            // (the rounds ran out) comes then.
            o.precopy.max_pause = std::chrono::microseconds(1);
            o.precopy.max_rounds = 1;
            o.write.on_warning = [&](const std::string& w) {
                if (w.find("pre-copy stopped") != std::string::npos) cancel = true;
            };
        }
        const auto file = host.tmp / ("cancel" + std::to_string(when) + ".core");
        EXPECT_THROW(dump_domain_to_file(*host.hv, 60, file, o), Error);
        EXPECT_FALSE(std::filesystem::exists(file));
        const json info = sim_info(host, 60);
        EXPECT_FALSE(info.at("logdirty").get<bool>());
        EXPECT_FALSE(info.at("paused").get<bool>());
    }
}

// The command line: --live dumps consistently and says how long the guest
// stood still; the sidecar and the file record it.
TEST(PrecopyCli, LiveOneShot) {
    const json d = guest(61, "hvm", kPages, 100, "hot");
    Host host(host_spec({d}));
    const auto dir = host.tmp / "dumps";
    std::filesystem::create_directories(dir);
    std::ofstream(host.tmp / "xen-dumpd.conf") << "[Dump]\nKeepFree=0\n";  // whatever this machine's disk has free
    RunResult r = run({"xen-dumpd", "--config", (host.tmp / "xen-dumpd.conf").string(), "--host", host.host(),
                       "--domain", "61", "--live", "--max-pause", "30000", "--dump-dir", dir.string(), "--socket",
                       (host.tmp / "none.sock").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("live dump: paused "), std::string::npos) << r.err;
    const std::filesystem::path file = r.out.substr(0, r.out.find('\n'));
    EXPECT_TRUE(check_instant(file, writer_of(d)).consistent());
    std::ifstream in(file.string() + ".json");
    const json sidecar = json::parse(in);
    EXPECT_EQ(sidecar.at("live"), "precopy");
    EXPECT_TRUE(sidecar.contains("pause_usec"));
    EXPECT_EQ(sidecar.at("live_rounds"), 0);
    EXPECT_EQ(std::to_string(sidecar.at("pause_usec").get<uint64_t>()),
              DumpReader::open(file).domain().get(keys::kPauseUsec).value_or("?"));
    // xen-dumpctl info says how it was made.
    EXPECT_NE(run({"xen-dumpctl", "info", file.string()}).out.find("\nLive: "), std::string::npos);
    r = run({"xen-dumpctl", "info", file.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("consistent (pre-copy): the guest paused " +
                         std::to_string(sidecar.at("pause_usec").get<uint64_t>()) + " us after 0 round(s)"),
              std::string::npos)
        << r.out;
    r = run({"xen-dumpctl", "info", "--json", file.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("live"), "precopy");
    // --live=inconsistent: today's dump, recorded as such.
    r = run({"xen-dumpd", "--host", host.host(), "--domain", "61", "--live=inconsistent", "-q", "-o",
             (host.tmp / "inc.core").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(DumpReader::open(host.tmp / "inc.core").domain().get(keys::kLive).value_or(""), "inconsistent");
    // Options that need a consistent --live.
    r = run({"xen-dumpd", "--host", host.host(), "--domain", "61", "--leave-paused", "-o",
             (host.tmp / "x.core").string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    r = run({"xen-dumpd", "--host", host.host(), "--domain", "61", "--live=sometimes", "-o",
             (host.tmp / "x.core").string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace xendump::test::live
