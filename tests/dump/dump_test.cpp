// Issue 3: dumps of simulated guests of every type, checked page by page
// against the simulator, and read by libkdumpfile.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "dump_support.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"

namespace xendump::test::dump {
namespace {

struct Case {
    std::string name;
    json domain;
    std::vector<uint64_t> balloon;  // pfn, count pairs to balloon out before the dump
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

// Extents with holes, including one at pfn 0x100.. and a run at the end.
json holey_extents(uint64_t base_mfn) {
    return json::array({json::array({0, base_mfn, 160}),
                        json::array({256, base_mfn + 1000, 3000}),
                        json::array({3300, base_mfn + 5000, 1}),
                        json::array({3302, base_mfn + 6000, 700}),
                        json::array({8000, base_mfn + 9000, 2192})});
}

std::vector<Case> cases() {
    std::vector<Case> v;
    v.push_back({"pv64_tree_holes", pv_domain(7, 8, "tree", 10240, holey_extents(0x100000)), {}});
    v.push_back({"pv64_linear", pv_domain(8, 8, "linear", 10240, holey_extents(0x200000)), {}});
    v.push_back({"pv64_both", pv_domain(9, 8, "both", 10240, holey_extents(0x300000)), {}});
    v.push_back({"pv32_tree", pv_domain(10, 4, "tree", 10240, holey_extents(0x40000)), {}});
    v.push_back({"pv32_linear", pv_domain(11, 4, "linear", 10240, holey_extents(0x50000)), {}});
    // HVM: the VGA hole (0xA0-0xBF) and an MMIO hole below "4 GiB" scaled down.
    v.push_back({"hvm_vga_mmio", hvm_domain(12, "hvm", 0x5000,
                                            json::array({json::array({0, 0x400000, 0xA0}),
                                                         json::array({0xC0, 0x4000C0, 0x2F40}),
                                                         json::array({0x4000, 0x404000, 0x1000})})),
                 {}});
    v.push_back({"pvh", hvm_domain(13, "pvh", 0x3000,
                                   json::array({json::array({0, 0x500000, 0x800}),
                                                json::array({0x1000, 0x501000, 0x1800})})),
                 {}});
    v.push_back({"pv64_ballooned", pv_domain(14, 8, "tree", 10240, holey_extents(0x600000)), {300, 500, 9000, 10}});
    return v;
}

class DumpGuest : public ::testing::TestWithParam<Case> {};

TEST_P(DumpGuest, EveryPageEqualsTheGuest) {
    const Case& c = GetParam();
    sim::Host host(host_spec({c.domain}));
    uint32_t domid = c.domain.at("domid");
    std::set<uint64_t> removed;
    for (size_t i = 0; i + 1 < c.balloon.size(); i += 2) {
        auto r = run({"xen-dump-sim", "balloon", host.dir.string(), std::to_string(domid),
                      std::to_string(c.balloon[i]), std::to_string(c.balloon[i + 1])});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        for (uint64_t p = c.balloon[i]; p < c.balloon[i] + c.balloon[i + 1]; ++p) removed.insert(p);
    }
    auto expected = expected_pages(c.domain, removed);
    TempDir out;
    std::vector<std::string> warnings;
    DumpOptions opt;
    opt.write.on_warning = [&](const std::string& w) { warnings.push_back(w); };
    auto path = out / "guest.core";
    DumpResult res = dump_domain_to_file(*host.hv, domid, path, opt);
    EXPECT_EQ(res.nr_pages, expected.size());
    bool pv = c.domain.at("type") == "pv";
    check_dump_against_host(path, host, domid, expected, pv);
    // The domain is running again afterwards.
    EXPECT_FALSE(host.hv->domain_info(domid)->paused);

    DumpReader r = DumpReader::open(path);
    EXPECT_EQ(r.domain().get("TYPE"), c.domain.at("type").get<std::string>());
    EXPECT_EQ(r.domain().get("PAUSED"), "1");
    if (pv) {
        std::string fmt = c.domain.at("p2m_format");
        EXPECT_EQ(r.domain().get("P2M"), fmt == "tree" ? "tree" : "linear");  // linear preferred
        EXPECT_EQ(r.guest_width(), c.domain.at("guest_width").get<unsigned>());
    } else {
        EXPECT_EQ(r.domain().get("P2M"), "translated");
    }
    // libkdumpfile 0.5.1 crashes on every EM_386 Xen dump: skip 32-bit PV.
    if (!(pv && c.domain.at("guest_width") == 4)) {
        std::vector<uint64_t> holes = {160, 255, 3301};
        if (!pv) holes = {0xA0, 0xBF};
        for (uint64_t p : removed) { holes.push_back(p); break; }
        check_with_libkdumpfile(path, host, domid, expected, c.domain.at("type"), holes);
    }
}

INSTANTIATE_TEST_SUITE_P(Types, DumpGuest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(Dump, SeventyThousandRuns) {
    json extents = json::array();
    for (uint64_t i = 0; i < 70000; ++i) extents.push_back(json::array({2 * i, 0x100000 + 2 * i, 1}));
    json dom = pv_domain(5, 8, "tree", 140000, extents);
    dom["vcpus"] = 1;
    sim::Host host(host_spec({dom}));
    TempDir out;
    auto path = out / "runs.core";
    auto res = dump_domain_to_file(*host.hv, 5, path, {});
    EXPECT_EQ(res.nr_runs, 70000u);
    check_dump_against_host(path, host, 5, expected_pages(dom), true);
}

TEST(Dump, PipeOutputEqualsFileOutput) {
    json dom = pv_domain(7, 8, "tree", 10240, holey_extents(0x100000));
    sim::Host host(host_spec({dom}));
    TempDir out;
    auto a = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "-o", (out / "a.core").string(),
                  "--quiet"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    auto b = run({"sh", "-c", "\"$0\" --host \"$1\" --domain 7 -o - --quiet | cat > \"$2\"",
                  build_program("xen-dumpd").string(), host.host(), (out / "b.core").string()});
    ASSERT_EQ(b.exit_code, 0) << b.err;
    // TIME= differs between two dumps; everything else must be equal. Compare
    // after verifying both and reading every page.
    DumpReader ra = DumpReader::open(out / "a.core"), rb = DumpReader::open(out / "b.core");
    EXPECT_TRUE(rb.verify().empty());
    ASSERT_EQ(ra.nr_pages(), rb.nr_pages());
    EXPECT_EQ(ra.file_size(), rb.file_size());
    std::vector<std::byte> pa(4096), pb(4096);
    for (const auto& e : ra.entries()) {
        ASSERT_TRUE(rb.read_page_by_pfn(e.pfn, pb));
        ASSERT_TRUE(ra.read_page_by_pfn(e.pfn, pa));
        ASSERT_EQ(0, std::memcmp(pa.data(), pb.data(), 4096)) << e.pfn;
    }
}


// Issue 16.3: pauses nest as Xen's do. What another holder does with its own
// pause (the operator, a second dump) never makes the domain run under this
// dump, and PAUSED= records what this dump did.
namespace {

json small_guest(uint32_t domid) {
    return pv_domain(domid, 8, "tree", 4096, json::array({json::array({0, 0x100000 + domid * 0x10000, 4000})}));
}

// The simulated host's own count of toolstack pauses.
unsigned pause_count(const sim::Host& host, uint32_t domid) {
    auto r = run({"xen-dump-sim", "info", host.dir.string(), std::to_string(domid), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out).at("pause_count").get<unsigned>();
}

}  // namespace

TEST(DumpPause, AnotherHoldersUnpauseDoesNotRunTheDomainUnderTheDump) {
    sim::Host host(host_spec({small_guest(7)}));
    TempDir out;
    // A first dump (or the operator) holds a pause when this one starts, and
    // lets go in the middle of it.
    std::optional<PausedDomain> first(std::in_place, *host.hv, 7);
    bool checked = false;
    DumpOptions opt;
    opt.write.on_progress = [&](const WriteProgress&) {
        if (checked) return;
        checked = true;
        EXPECT_EQ(pause_count(host, 7), 2u) << "the dump did not take a pause of its own";
        first.reset();
        EXPECT_TRUE(host.hv->domain_info(7)->paused) << "the domain runs under the dump";
    };
    dump_domain_to_file(*host.hv, 7, out / "d.core", opt);
    EXPECT_TRUE(checked);
    EXPECT_FALSE(host.hv->domain_info(7)->paused) << "the dump did not give its pause back";
    EXPECT_EQ(pause_count(host, 7), 0u);
    EXPECT_EQ(DumpReader::open(out / "d.core").domain().get("PAUSED"), "1");
}

TEST(DumpPause, OperatorsPauseIsCountedAndKept) {
    sim::Host host(host_spec({small_guest(7)}));
    TempDir out;
    host.hv->pause(7);  // xl pause
    DumpOptions opt;
    unsigned during = 0;
    opt.write.on_progress = [&](const WriteProgress&) {
        if (during == 0) during = pause_count(host, 7);
    };
    dump_domain_to_file(*host.hv, 7, out / "d.core", opt);
    EXPECT_EQ(during, 2u);
    EXPECT_EQ(pause_count(host, 7), 1u) << "the operator's pause was taken away or doubled";
    EXPECT_EQ(DumpReader::open(out / "d.core").domain().get("PAUSED"), "1");
    // A failed dump gives back exactly its own pause too.
    EXPECT_THROW(dump_domain_to_file(*host.hv, 7, out / "d.core", opt), Error);  // exists already
    EXPECT_EQ(pause_count(host, 7), 1u);
}

TEST(DumpPause, LiveDumpOfAPausedDomainRecordsWhatItDid) {
    // --live takes no pause: someone else's may end at any time, so the dump
    // does not claim PAUSED=1 on the strength of it.
    sim::Host host(host_spec({small_guest(7)}));
    TempDir out;
    host.hv->pause(7);
    DumpOptions opt;
    opt.live = true;
    dump_domain_to_file(*host.hv, 7, out / "l.core", opt);
    EXPECT_EQ(DumpReader::open(out / "l.core").domain().get("PAUSED"), "0");
    EXPECT_EQ(pause_count(host, 7), 1u);
}

TEST(DumpPause, CancelFlagStopsEveryStageAndUnpauses) {
    // A cancel already set when the dump starts: the first read of the guest
    // (the vcpu contexts, before the p2m walk) stops it, after the pause.
    sim::Host host(host_spec({small_guest(7)}));
    TempDir out;
    std::atomic<bool> cancel{true};
    DumpOptions opt;
    opt.write.cancel = &cancel;
    try {
        dump_domain_to_file(*host.hv, 7, out / "c.core", opt);
        ADD_FAILURE() << "a cancelled dump succeeded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
    }
    EXPECT_EQ(pause_count(host, 7), 0u);
    EXPECT_FALSE(std::filesystem::exists(out / "c.core"));
}

TEST(DumpPause, CancelFromAnotherThreadDuringTheP2mWalkIsPrompt) {
    // What the service does on `xen-dumpctl cancel` or stop: it sets the
    // job's flag from another thread. During a slow p2m walk (48 mapping
    // calls of a quarter second) the dump ends within a call or two.
    json dom = hvm_domain(12, "hvm", 48 * 8192, json::array({json::array({0, 0x400000, 0xA0})}));
    dom["map_cost"] = json{{"per_call_us", 250000}, {"per_page_ns", 0}};
    sim::Host host(host_spec({dom}));
    TempDir out;
    std::atomic<bool> cancel{false};
    DumpOptions opt;
    opt.write.cancel = &cancel;
    std::chrono::steady_clock::time_point cancelled_at;
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        cancelled_at = std::chrono::steady_clock::now();
        cancel = true;
    });
    EXPECT_THROW(dump_domain_to_file(*host.hv, 12, out / "c.core", opt), Error);
    const auto ended = std::chrono::steady_clock::now();
    canceller.join();
    const double seconds = std::chrono::duration<double>(ended - cancelled_at).count();
    EXPECT_LT(seconds, 4.0) << "the cancel waited for the p2m walk (about 11 s)";
    EXPECT_EQ(pause_count(host, 12), 0u);
    EXPECT_FALSE(std::filesystem::exists(out / "c.core"));
}

}  // namespace
}  // namespace xendump::test::dump
