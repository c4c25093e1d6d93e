// What changes under pre-copy (issue 35 item 4): a guest that balloons out
// or in, changes its p2m or raises its highest gfn while a consistent live
// dump runs. The dump starts over with a fresh discovery, so the file has
// the layout of the instant it shows (a pfn given back is a hole, one taken
// back is copied), and a guest whose layout keeps changing ends in an Error
// with its reason. The guest balloons at a chosen moment of the dump: from
// the progress report of a pre-copy round (after its CLEAN, before its
// copy or the pause), so the change is seen by the next CLEAN while the
// guest runs, or by the paused round's checks.
#include <sys/resource.h>

#include <set>

#include <gtest/gtest.h>

#include "hv/forwarding_hypervisor.hpp"
#include "live_support.hpp"
#include "sim/sim_host.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::test::live {
namespace {

using test::sim::Host;

constexpr uint64_t kPages = 4096;  // 16 MiB
constexpr uint64_t kBalloonPfn = 0x400, kBalloonCount = 24;

// The guest types, with a PV guest's two p2m forms: the 3-level tree only
// (no p2m_generation), the linear list (which publishes one).
struct Guest {
    const char* name;
    const char* type;
    const char* p2m_format;  // PV only
};
constexpr Guest kGuests[] = {{"pv tree", "pv", "tree"}, {"pv linear", "pv", "linear"}, {"pvh", "pvh", nullptr},
                             {"hvm", "hvm", nullptr}};

json guest_of(const Guest& g, uint32_t domid, uint64_t rate = 100) {
    json d = guest(domid, g.type, kPages, rate, "random");
    if (g.p2m_format) d["p2m_format"] = g.p2m_format;
    return d;
}

// When the guest changes its layout: while the rounds run (a pause no copy
// fits: the change is seen by the next CLEAN, the guest running), or just
// before the pause (seen under it).
enum class When { rounds, pause };

DumpOptions options_for(When when) {
    DumpOptions o;
    o.precopy.on = true;
    if (when == When::pause) {
        o.precopy.max_pause = std::chrono::seconds(30);  // paused at the first CLEAN
    } else {
        o.precopy.max_pause = std::chrono::microseconds(1);  // rounds until they run out
        o.precopy.max_rounds = 3;
    }
    return o;
}

// Runs `change` once, from the report of the first pre-copy round.
void at_first_round(DumpOptions& o, std::function<void()> change) {
    auto done = std::make_shared<bool>(false);
    o.write.on_progress = [done, change = std::move(change)](const WriteProgress& p) {
        if (p.live_round && !*done) {
            *done = true;
            change();
        }
    };
}

void expect_verified(const std::filesystem::path& file) {
    for (const auto& f : DumpReader::open(file).verify()) ADD_FAILURE() << f.check << ": " << f.message;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& what) {
    for (const auto& l : lines)
        if (l.find(what) != std::string::npos) return true;
    return false;
}

std::set<uint64_t> skipped(const Host& host, uint32_t domid, const Guest& g) {
    return std::string(g.type) == "pv" ? p2m_pfns(host, domid) : std::set<uint64_t>{};
}

void expect_guest_running(const Host& host, uint32_t domid) {
    const json info = sim_info(host, domid);
    EXPECT_FALSE(info.at("logdirty").get<bool>());
    EXPECT_FALSE(info.at("paused").get<bool>());
}

// Each guest type, its layout changed at each moment: body(when, guest, domid).
template <typename Body>
void each_case(uint32_t domid, Body body) {
    for (When when : {When::rounds, When::pause}) {
        for (const Guest& g : kGuests) {
            SCOPED_TRACE(std::string(g.name) + (when == When::rounds ? ", during the rounds" : ", before the pause"));
            body(when, g, domid++);
        }
    }
}

std::set<uint64_t> pfns(uint64_t first, uint64_t count) {
    std::set<uint64_t> out;
    for (uint64_t p = first; p < first + count; ++p) out.insert(p);
    return out;
}

// What a dump that started over once is: nothing unreadable, one instant of
// the writer (pages in `skip` aside: written while ballooned out, they hold
// no write the writer's replay knows), verified, the guest running.
void expect_restarted_once(const Host& host, uint32_t domid, const Guest& g, const json& d, const DumpResult& r,
                           const std::filesystem::path& file, std::set<uint64_t> skip = {}) {
    ASSERT_TRUE(r.live);
    EXPECT_EQ(r.live->restarts, 1u);
    EXPECT_TRUE(r.unreadable_pfns.empty()) << r.unreadable_pfns.size() << " pages listed unreadable";
    const DumpReader reader = DumpReader::open(file);
    EXPECT_TRUE(reader.unreadable_pfns().empty());
    EXPECT_EQ(reader.domain().get(keys::kLiveRestarts).value_or(""), "1");
    skip.merge(skipped(host, domid, g));
    const Instant i = check_instant(file, writer_of(d), skip);
    EXPECT_TRUE(i.consistent()) << i.torn << " torn pages of " << i.pages_checked;
    expect_verified(file);
    expect_guest_running(host, domid);
}

// Whether the dump holds each of `pfns` (all or none expected).
void expect_in_dump(const std::filesystem::path& file, const std::set<uint64_t>& pfns, bool present) {
    const DumpReader reader = DumpReader::open(file);
    std::vector<std::byte> page(4096);
    for (uint64_t pfn : pfns) EXPECT_EQ(reader.read_page_by_pfn(pfn, page), present) << "pfn " << pfn;
}

// Ballooned out during the rounds or just before the pause: the dump
// starts over once, and the file has those pfns as holes (absent, not
// zeros listed unreadable), is one instant of the guest and verifies.
TEST(PrecopyLayout, BalloonOutIsAHole) {
    each_case(70, [](When when, const Guest& g, uint32_t domid) {
        const json d = guest_of(g, domid);
        Host host(host_spec({d}, /*shadow_paging=*/true));
        xendump::sim::SimHost sim(host.dir);
        DumpOptions o = options_for(when);
        at_first_round(o, [&] { sim.balloon(domid, kBalloonPfn, kBalloonCount); });
        std::vector<std::string> warnings;
        o.write.on_warning = [&](const std::string& w) { warnings.push_back(w); };
        const auto file = host.tmp / "live.core";
        const DumpResult r = dump_domain_to_file(*host.hv, domid, file, o);
        expect_restarted_once(host, domid, g, d, r, file);
        EXPECT_TRUE(any_contains(warnings, "memory layout changed during the pre-copy")) << warnings.size();
        EXPECT_TRUE(any_contains(r.warnings, "restart 1 of at most 3"));
        expect_in_dump(file, pfns(kBalloonPfn, kBalloonCount), false);
        expect_in_dump(file, {kBalloonPfn - 1, kBalloonPfn + kBalloonCount}, true);
        // xen-dumpctl info says so.
        const RunResult info = run({"xen-dumpctl", "info", file.string()});
        EXPECT_NE(info.out.find("started over 1 time(s) as the guest's memory layout changed"), std::string::npos)
            << info.out;
        EXPECT_EQ(json::parse(run({"xen-dumpctl", "info", "--json", file.string()}).out).at("live_restarts"), "1");
    });
}

// Ballooned back in: the pfns are copied, with the guest's contents. The
// guest is left paused at the dump's instant, so a paused dump of it
// afterwards must hold the same pfns, frames and bytes.
TEST(PrecopyLayout, BalloonInIsCopied) {
    each_case(80, [](When when, const Guest& g, uint32_t domid) {
        const json d = guest_of(g, domid);
        Host host(host_spec({d}, /*shadow_paging=*/true));
        xendump::sim::SimHost sim(host.dir);
        sim.balloon(domid, kBalloonPfn, kBalloonCount);
        DumpOptions o = options_for(when);
        o.precopy.leave_paused = true;
        at_first_round(o, [&] { sim.unballoon(domid, kBalloonPfn, kBalloonCount); });
        const auto live_file = host.tmp / "live.core", paused_file = host.tmp / "paused.core";
        const DumpResult r = dump_domain_to_file(*host.hv, domid, live_file, o);
        dump_domain_to_file(*host.hv, domid, paused_file, DumpOptions{});
        host.hv->unpause(domid);
        expect_restarted_once(host, domid, g, d, r, live_file, pfns(kBalloonPfn, kBalloonCount));
        expect_in_dump(live_file, pfns(kBalloonPfn, kBalloonCount), true);
        EXPECT_EQ(pages_differing(live_file, paused_file), 0u);
    });
}

// Ballooned out and in at once, as many pages each way: the guest's page
// count does not move, so what tells of the change is the dirty log (the
// PV guest's p2m pages it rewrote, the HVM/PVH gfns Xen populated) and,
// for a PV guest under the pause, its p2m read again.
TEST(PrecopyLayout, SwapSeenThroughTheDirtyLog) {
    constexpr uint64_t kOtherPfn = 0x800;
    each_case(140, [](When when, const Guest& g, uint32_t domid) {
        const json d = guest_of(g, domid);
        Host host(host_spec({d}, /*shadow_paging=*/true));
        xendump::sim::SimHost sim(host.dir);
        sim.balloon(domid, kOtherPfn, kBalloonCount);
        DumpOptions o = options_for(when);
        at_first_round(o, [&] {
            sim.balloon(domid, kBalloonPfn, kBalloonCount);
            sim.unballoon(domid, kOtherPfn, kBalloonCount);
        });
        const auto file = host.tmp / "live.core";
        const DumpResult r = dump_domain_to_file(*host.hv, domid, file, o);
        expect_restarted_once(host, domid, g, d, r, file, pfns(kOtherPfn, kBalloonCount));
        expect_in_dump(file, pfns(kBalloonPfn, kBalloonCount), false);
        expect_in_dump(file, pfns(kOtherPfn, kBalloonCount), true);
    });
}

// A guest that balloons in every round keeps changing: the restarts are
// bounded and the dump ends in an Error that says why and what to do; no
// file, log-dirty off, the guest running.
TEST(PrecopyLayout, KeepsChangingEndsInAnError) {
    uint32_t domid = 90;
    for (const Guest& g : kGuests) {
        SCOPED_TRACE(g.name);
        const json d = guest_of(g, domid);
        Host host(host_spec({d}, /*shadow_paging=*/true));
        xendump::sim::SimHost sim(host.dir);
        DumpOptions o = options_for(When::pause);
        unsigned changes = 0;
        bool out = false;
        o.write.on_progress = [&](const WriteProgress& p) {
            if (!p.live_round) return;
            out = !out;
            if (out) sim.balloon(domid, kBalloonPfn, kBalloonCount);
            else sim.unballoon(domid, kBalloonPfn, kBalloonCount);
            ++changes;
        };
        const auto file = host.tmp / "live.core";
        try {
            dump_domain_to_file(*host.hv, domid, file, o);
            ADD_FAILURE() << "dumped";
        } catch (const Error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("kept changing (ballooning) during the pre-copy: 3 restarts"), std::string::npos)
                << what;
            EXPECT_NE(what.find("--live=inconsistent"), std::string::npos) << what;
        }
        EXPECT_EQ(changes, 4u) << "one change an attempt: the first and 3 restarts";
        EXPECT_FALSE(std::filesystem::exists(file));
        for (const auto& entry : std::filesystem::directory_iterator(host.tmp.path()))
            EXPECT_EQ(entry.path().filename().string().find(".xendump-tmp."), std::string::npos) << entry.path();
        expect_guest_running(host, domid);
        ++domid;
    }
}

// A hypervisor whose guest's highest gfn rises when told to (an HVM guest
// given memory above its old top: Xen's max_mapped_pfn only rises).
class RaisingMaxGpfn : public ForwardingHypervisor {
public:
    using ForwardingHypervisor::ForwardingHypervisor;
    uint64_t maximum_gpfn(uint32_t domid) override { return ForwardingHypervisor::maximum_gpfn(domid) + raised; }
    uint64_t raised = 0;
};

// An HVM guest's highest gfn raised during the rounds: the dump starts over
// and examines the gfns up to the new one (MAX_PFN=).
TEST(PrecopyLayout, HighestGfnRaised) {
    for (When when : {When::rounds, When::pause}) {
        SCOPED_TRACE(when == When::rounds ? "during the rounds" : "before the pause");
        const json d = guest_of(kGuests[3], 100);
        Host host(host_spec({d}));
        RaisingMaxGpfn hv(*host.hv);
        DumpOptions o = options_for(when);
        at_first_round(o, [&] { hv.raised = 0x1000; });
        const auto file = host.tmp / "live.core";
        const DumpResult r = dump_domain_to_file(hv, 100, file, o);
        ASSERT_TRUE(r.live);
        EXPECT_EQ(r.live->restarts, 1u);
        const DumpReader reader = DumpReader::open(file);
        EXPECT_EQ(reader.domain().get(keys::kMaxPfn).value_or(""), std::to_string(kPages + 0x1000));
        EXPECT_TRUE(check_instant(file, writer_of(d)).consistent());
        expect_verified(file);
        expect_guest_running(host, 100);
    }
}

// A highest gfn far above the guest's memory (a PV guest's is its own
// max_pfn: Xen derives it from shared_info): the pre-copy's dirty bitmap
// covers no more pfns than discovery examines (p2m_size_limit), instead of
// the 128 GiB that 2^40 pfns would take, and the dump is consistent.
TEST(PrecopyLayout, ImplausibleHighestGfnBoundsTheBitmap) {
    uint32_t domid = 130;
    for (const Guest& g : {kGuests[0], kGuests[3]}) {
        SCOPED_TRACE(g.name);
        const json d = guest_of(g, domid);
        Host host(host_spec({d}, /*shadow_paging=*/true));
        RaisingMaxGpfn hv(*host.hv);
        hv.raised = uint64_t{1} << 40;
        const auto file = host.tmp / "live.core";
        const DumpResult r = dump_domain_to_file(hv, domid, file, options_for(When::rounds));
        ASSERT_TRUE(r.live);
        EXPECT_EQ(r.live->restarts, 0u);
        EXPECT_TRUE(check_instant(file, writer_of(d)).consistent());
        expect_verified(file);
        expect_guest_running(host, domid);
        ++domid;
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    EXPECT_LT(usage.ru_maxrss, 1L << 20) << "peak RSS in KiB";
}

// No change, no restart: a guest that only writes is dumped once, with no
// LIVE_RESTARTS= key.
TEST(PrecopyLayout, NoChangeNoRestart) {
    uint32_t domid = 110;
    for (const Guest& g : kGuests) {
        SCOPED_TRACE(g.name);
        const json d = guest_of(g, domid, 300);
        Host host(host_spec({d}, /*shadow_paging=*/true));
        const auto file = host.tmp / "live.core";
        const DumpResult r = dump_domain_to_file(*host.hv, domid, file, options_for(When::rounds));
        ASSERT_TRUE(r.live);
        EXPECT_EQ(r.live->restarts, 0u);
        EXPECT_FALSE(DumpReader::open(file).domain().get(keys::kLiveRestarts));
        ++domid;
    }
}

// A restart keeps the bytes independent of the thread count.
TEST(PrecopyLayout, SameBytesForAnyThreadsAfterARestart) {
    std::vector<std::vector<std::byte>> pages;
    for (unsigned threads : {1u, 3u}) {
        SCOPED_TRACE(threads);
        const json d = guest_of(kGuests[1], 120, 300);
        Host host(host_spec({d}, /*shadow_paging=*/true));
        xendump::sim::SimHost sim(host.dir);
        DumpOptions o = options_for(When::pause);
        o.write.threads = threads;
        at_first_round(o, [&] { sim.balloon(120, kBalloonPfn, kBalloonCount); });
        const auto file = host.tmp / "t.core";
        const DumpResult r = dump_domain_to_file(*host.hv, 120, file, o);
        ASSERT_TRUE(r.live);
        EXPECT_EQ(r.live->restarts, 1u);
        DumpReader reader = DumpReader::open(file);
        std::vector<std::byte> all(reader.nr_pages() * 4096);
        reader.read_pages(0, reader.nr_pages(), all);
        pages.push_back(std::move(all));
    }
    EXPECT_TRUE(pages[1] == pages[0]) << "pages differ with another thread count";
}

// Counts the frames mapped while the guest is paused.
class CountingPaused : public PauseTracking {
public:
    using PauseTracking::PauseTracking;
    std::unique_ptr<ForeignMapping> map_foreign(uint32_t domid, std::span<const uint64_t> frames) override {
        if (paused()) mapped_in_pause += frames.size();
        return PauseTracking::map_foreign(domid, frames);
    }
    uint64_t mapped_in_pause = 0;
};

// The pause of a PV guest reads only what may have changed: with the linear
// list and an unchanged p2m_generation no p2m structure at all; with the
// tree alone (no generation), its root and frame lists (1/512 of the p2m)
// walked again; in both, the p2m pages the guest dirtied (none here).
TEST(PrecopyLayout, PvPauseReadsOnlyWhatMayHaveChanged) {
    uint64_t mapped[2] = {};
    for (int linear = 0; linear < 2; ++linear) {
        SCOPED_TRACE(linear ? "linear" : "tree");
        const json d = guest_of(kGuests[linear], 150, 0);
        Host host(host_spec({d}, /*shadow_paging=*/true));
        CountingPaused hv(*host.hv);
        const DumpResult r = dump_domain_to_file(hv, 150, host.tmp / "p.core", options_for(When::pause));
        ASSERT_TRUE(r.live);
        EXPECT_EQ(r.live->restarts, 0u);
        EXPECT_EQ(r.live->pages_in_pause, 0u);
        mapped[linear] = hv.mapped_in_pause;
    }
    // shared_info twice (the layout check, the final round's copy) either
    // way; the tree's root and its one frame list (8 p2m pages of 512).
    EXPECT_EQ(mapped[1], 2u);
    EXPECT_EQ(mapped[0], mapped[1] + 2);
}

// The simulator's ballooning, as a live dump sees it: a PV guest rewrites
// its p2m pages (dirty with log-dirty on) and bumps p2m_generation where it
// publishes one (the linear list); an HVM gfn populated is dirty, one
// unpopulated clean; the page count follows.
TEST(SimBalloon, WhatTheDirtyLogAndSharedInfoSay) {
    for (const Guest& g : kGuests) {
        SCOPED_TRACE(g.name);
        const json d = guest_of(g, 130, 0);
        Host host(host_spec({d}, /*shadow_paging=*/true));
        xendump::sim::SimHost sim(host.dir);
        const bool pv = std::string(g.type) == "pv";
        const uint64_t generation0 = pv ? sim_info(host, 130).at("shared_info").at("p2m_generation").get<uint64_t>() : 0;
        host.hv->enable_logdirty(130);
        std::vector<uint64_t> bitmap((kPages + 63) / 64);
        auto dirty = [&] {
            host.hv->read_dirty(130, DirtyRead::clean, bitmap, kPages);
            std::set<uint64_t> out;
            for (uint64_t p = 0; p < kPages; ++p)
                if (bitmap[p / 64] >> (p % 64) & 1) out.insert(p);
            return out;
        };
        sim.balloon(130, kBalloonPfn, kBalloonCount);
        const std::set<uint64_t> out_dirty = dirty();
        EXPECT_EQ(sim_info(host, 130).at("nr_pages").get<uint64_t>(), kPages - kBalloonCount);
        sim.unballoon(130, kBalloonPfn, kBalloonCount);
        const std::set<uint64_t> in_dirty = dirty();
        if (pv) {
            // Entries 0x400… of 512 a page: the p2m page of pfns 0x400–0x5ff.
            const json info = sim_info(host, 130);
            ASSERT_EQ(out_dirty.size(), 1u);
            EXPECT_EQ(in_dirty, out_dirty);
            EXPECT_TRUE(p2m_pfns(host, 130).count(*out_dirty.begin()));
            const uint64_t generation = info.at("shared_info").at("p2m_generation").get<uint64_t>();
            EXPECT_EQ(generation, generation0 + (std::string(g.p2m_format) == "linear" ? 4 : 0));
        } else {
            EXPECT_TRUE(out_dirty.empty());
            std::set<uint64_t> expected;
            for (uint64_t p = kBalloonPfn; p < kBalloonPfn + kBalloonCount; ++p) expected.insert(p);
            EXPECT_EQ(in_dirty, expected);
        }
        EXPECT_EQ(sim_info(host, 130).at("ballooned").size(), 0u);
        host.hv->disable_logdirty(130);
        // The command line does the same.
        EXPECT_EQ(run({"xen-dump-sim", "balloon", host.dir.string(), "130", "1024", "4"}).exit_code, 0);
        RunResult r = run({"xen-dump-sim", "unballoon", host.dir.string(), "130", "1024", "4"});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        r = run({"xen-dump-sim", "unballoon", host.dir.string(), "130", "1024", "4"});
        EXPECT_NE(r.exit_code, 0);
        EXPECT_NE(r.err.find("not ballooned out"), std::string::npos) << r.err;
    }
}

}  // namespace
}  // namespace xendump::test::live
