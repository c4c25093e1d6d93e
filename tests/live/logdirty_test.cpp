// The simulated host's log-dirty mode and writer (issue 35, step 1): the
// bitmap a CLEAN returns is exactly the pages the writer wrote since the
// last CLEAN, PEEK leaves it, OFF drops it, and every refusal says why.
#include <cerrno>
#include <set>

#include <gtest/gtest.h>

#include "live_support.hpp"
#include "xendump/error.hpp"

namespace xendump::test::live {
namespace {

using test::sim::Host;

constexpr uint64_t kPages = 2048;

// Maps `count` pages from pfn 16 (the guest runs meanwhile: its writer too).
void map_some(Hypervisor& hv, uint32_t domid, uint64_t count) {
    std::vector<uint64_t> frames;
    for (uint64_t i = 0; i < count; ++i) frames.push_back(16 + i % (kPages - 16));
    auto m = hv.map_foreign(domid, frames);
    for (size_t i = 0; i < m->count(); ++i) ASSERT_EQ(m->error(i), 0);
}

std::set<uint64_t> bits(const std::vector<uint64_t>& bitmap) {
    std::set<uint64_t> out;
    for (uint64_t p = 0; p < bitmap.size() * 64; ++p)
        if (bitmap[p / 64] >> (p % 64) & 1) out.insert(p);
    return out;
}

// The pfns writes [from, to) of the writer go to.
std::set<uint64_t> written(const xendump::sim::WriterSpec& w, uint64_t from, uint64_t to) {
    std::set<uint64_t> out;
    for (uint64_t k = from; k < to; ++k) out.insert(w.first_pfn + xendump::sim::writer_target(w, k));
    return out;
}

TEST(LogDirty, CleanReturnsWhatTheWriterWrote) {
    for (const char* pattern : {"sequential", "random", "hot"}) {
        SCOPED_TRACE(pattern);
        const json d = guest(3, "hvm", kPages, 100, pattern);
        Host host(host_spec({d}));
        const auto w = writer_of(d);
        host.hv->enable_logdirty(3);
        map_some(*host.hv, 3, 1000);  // 100 writes
        EXPECT_EQ(sim_info(host, 3).at("writer_writes"), 100u);
        std::vector<uint64_t> bitmap((kPages + 63) / 64);
        // PEEK: the bits, left set.
        const uint64_t peeked = host.hv->read_dirty(3, DirtyRead::peek, bitmap, kPages);
        const std::set<uint64_t> expected = written(w, 0, 100);
        EXPECT_EQ(bits(bitmap), expected);
        EXPECT_EQ(peeked, expected.size());
        // CLEAN: the same bits, cleared after.
        EXPECT_EQ(host.hv->read_dirty(3, DirtyRead::clean, bitmap, kPages), expected.size());
        EXPECT_EQ(bits(bitmap), expected);
        EXPECT_EQ(host.hv->read_dirty(3, DirtyRead::clean, bitmap, kPages), 0u);
        // Paused, the guest writes nothing however much is mapped.
        host.hv->pause(3);
        map_some(*host.hv, 3, 3000);
        EXPECT_EQ(host.hv->read_dirty(3, DirtyRead::final_clean, bitmap, kPages), 0u);
        host.hv->unpause(3);
        map_some(*host.hv, 3, 500);  // 50 more writes
        EXPECT_EQ(host.hv->read_dirty(3, DirtyRead::clean, bitmap, kPages), written(w, 100, 150).size());
        EXPECT_EQ(bits(bitmap), written(w, 100, 150));
        // The writer's pages carry their generation: the last write to each.
        const std::set<uint64_t> recent = written(w, 100, 150);
        std::vector<uint64_t> frames(recent.begin(), recent.end());
        auto m = host.hv->map_foreign(3, frames);  // 5 more writes first
        for (size_t i = 0; i < frames.size(); ++i) {
            auto stamp = xendump::sim::read_written_stamp(std::span(m->page(i), 4096));
            ASSERT_TRUE(stamp) << "pfn " << frames[i];
            EXPECT_EQ(stamp->pfn, frames[i]);
            EXPECT_EQ(w.first_pfn + xendump::sim::writer_target(w, stamp->generation - 1), frames[i]);
            EXPECT_GT(stamp->generation, 100u);
        }
        // OFF: the bitmap is gone; reading it is an error.
        host.hv->disable_logdirty(3);
        EXPECT_FALSE(sim_info(host, 3).at("logdirty").get<bool>());
        EXPECT_THROW(host.hv->read_dirty(3, DirtyRead::clean, bitmap, kPages), Error);
    }
}

TEST(LogDirty, WithoutLogDirtyTheWriterMarksNothing) {
    const json d = guest(4, "pvh", kPages, 500, "random");
    Host host(host_spec({d}));
    map_some(*host.hv, 4, 1000);
    host.hv->enable_logdirty(4);
    std::vector<uint64_t> bitmap((kPages + 63) / 64);
    EXPECT_EQ(host.hv->read_dirty(4, DirtyRead::clean, bitmap, kPages), 0u);
    EXPECT_EQ(sim_info(host, 4).at("writer_writes"), 500u);
}

// Every refusal, its errno and its reason; a refused enable leaves the
// state as it was (an owner's log-dirty stays on).
TEST(LogDirty, Refusals) {
    json pv = guest(5, "pv", kPages, 0, "");
    json passthrough = guest(6, "hvm", kPages, 0, "");
    passthrough["passthrough"] = true;
    json dying = guest(7, "pvh", kPages, 0, "");
    dying["dying"] = true;
    json owned = guest(8, "hvm", kPages, 0, "");
    Host host(host_spec({pv, passthrough, dying, owned}));
    struct Case {
        uint32_t domid;
        int err;
        const char* reason;
    } cases[] = {{5, EOPNOTSUPP, "shadow paging"}, {6, EINVAL, "passed-through PCI devices"}, {7, EINVAL, "dying"}};
    for (const Case& c : cases) {
        SCOPED_TRACE(c.domid);
        try {
            host.hv->enable_logdirty(c.domid);
            ADD_FAILURE() << "log-dirty was turned on";
        } catch (const Error& e) {
            EXPECT_EQ(e.sys_errno(), c.err);
            EXPECT_NE(std::string(e.what()).find(c.reason), std::string::npos) << e.what();
        }
        EXPECT_FALSE(sim_info(host, c.domid).at("logdirty").get<bool>());
    }
    // Already on (another process's migration): EBUSY, and still on after.
    auto other = open_hypervisor(host.host());
    other->enable_logdirty(8);
    try {
        host.hv->enable_logdirty(8);
        ADD_FAILURE() << "log-dirty was taken over";
    } catch (const Error& e) {
        EXPECT_EQ(e.sys_errno(), EBUSY);
        EXPECT_NE(std::string(e.what()).find("already on"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(sim_info(host, 8).at("logdirty").get<bool>());
}

TEST(LogDirty, PvWithShadowPaging) {
    Host host(host_spec({guest(9, "pv", kPages, 100, "sequential")}, /*shadow_paging=*/true));
    host.hv->enable_logdirty(9);
    EXPECT_TRUE(sim_info(host, 9).at("logdirty").get<bool>());
    host.hv->disable_logdirty(9);
}

TEST(LogDirty, GuardTurnsItOffOnEveryPath) {
    Host host(host_spec({guest(10, "hvm", kPages, 100, "sequential")}));
    try {
        LogDirtyGuard guard(*host.hv, 10);
        EXPECT_TRUE(sim_info(host, 10).at("logdirty").get<bool>());
        throw Error("some failure");
    } catch (const Error&) {
    }
    EXPECT_FALSE(sim_info(host, 10).at("logdirty").get<bool>());
}

TEST(LogDirty, SpecRejectsABadWriter) {
    json d = guest(11, "hvm", kPages, 100, "sequential");
    d["writer"]["pattern"] = "zigzag";
    EXPECT_THROW(Host(host_spec({d})), std::runtime_error);
    d = guest(11, "hvm", kPages, 100, "sequential");
    d["writer"]["pages"] = kPages;  // from 16: past the p2m
    EXPECT_THROW(Host(host_spec({d})), std::runtime_error);
}

}  // namespace
}  // namespace xendump::test::live
