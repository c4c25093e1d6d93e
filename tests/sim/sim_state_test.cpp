// State shared between processes: the CLI and a second Hypervisor object see
// every change; watches fire across processes; list/info JSON; bad specs.
#include <poll.h>

#include <fstream>

#include "sim_test_util.hpp"
#include "xendump/error.hpp"

namespace xendump::test::sim {
namespace {

using nlohmann::json;

json two_domains() {
    return {{"xen_version", "4.17.2"},
            {"domains",
             {{{"domid", 7},
               {"name", "web01"},
               {"uuid", "0d5e9a3c-1f2b-4c6d-8e9f-a0b1c2d3e4f5"},
               {"type", "pv"},
               {"vcpus", 2},
               {"p2m_size", 4096},
               {"extents", {{0, 0x100000, 160}, {256, 0x200000, 3840}}}},
              {{"domid", 8}, {"name", "db01"}, {"type", "hvm"}, {"p2m_size", 2048}, {"state", "paused"}}}}};
}

unsigned pause_count(const Host& h, uint32_t domid) {
    auto r = run({"xen-dump-sim", "info", h.dir.string(), std::to_string(domid), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out).at("pause_count").get<unsigned>();
}

bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

TEST(SimState, DomainInfoFromSpec) {
    Host h(two_domains());
    auto list = h.hv->list_domains();
    ASSERT_EQ(list.size(), 2u);
    auto d7 = *h.hv->domain_info(7);
    EXPECT_EQ(d7.tot_pages, 160u + 3840u);
    EXPECT_FALSE(d7.hvm);
    EXPECT_FALSE(d7.paused);
    EXPECT_EQ(d7.max_vcpu_id, 1u);
    EXPECT_EQ(uuid_to_string(d7.handle), "0d5e9a3c-1f2b-4c6d-8e9f-a0b1c2d3e4f5");
    auto d8 = *h.hv->domain_info(8);
    EXPECT_TRUE(d8.hvm);
    EXPECT_FALSE(d8.pvh);
    EXPECT_TRUE(d8.paused);
    EXPECT_EQ(d8.tot_pages, 2048u);
    EXPECT_EQ(h.hv->domain_name(8), "db01");
    EXPECT_EQ(h.hv->find_domain_by_name("web01"), 7u);
    EXPECT_FALSE(h.hv->find_domain_by_name("nope"));
    EXPECT_EQ(h.hv->xen_version().major_version, 4u);
    EXPECT_EQ(h.hv->xen_version().minor_version, 17u);
    EXPECT_STREQ(h.hv->xen_version().extra_version, ".2");
    // shared_info is mappable by its mfn but belongs to no extent.
    Frame si = read_frame(*h.hv, 7, d7.shared_info_frame);
    EXPECT_EQ(si.error, 0);
    EXPECT_NE(d7.shared_info_frame, d8.shared_info_frame);
}

TEST(SimState, ChangesAreSeenByOtherObjectsAndProcesses) {
    Host h(two_domains());
    auto other = open_hypervisor(h.host());
    {
        PausedDomain p(*h.hv, 7);
        EXPECT_TRUE(p.paused_by_us());
        EXPECT_TRUE(other->domain_info(7)->paused);
        auto r = run({"xen-dump-sim", "list", h.dir.string(), "--json"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(json::parse(r.out)[0]["state"], "paused");
    }
    EXPECT_FALSE(other->domain_info(7)->paused);
    {
        // Already paused: paused once more (issue 16.3: pauses nest as Xen's
        // do, and the first holder's unpause must not run it under this one).
        PausedDomain p(*h.hv, 8);
        EXPECT_TRUE(p.paused_by_us());
        EXPECT_TRUE(p.was_paused_before());
        EXPECT_EQ(pause_count(h, 8), 2u);
    }
    EXPECT_TRUE(other->domain_info(8)->paused);  // the first pause remains
    EXPECT_EQ(pause_count(h, 8), 1u);
    ASSERT_EQ(run({"xen-dump-sim", "unpause", h.dir.string(), "db01"}).exit_code, 0);
    EXPECT_FALSE(h.hv->domain_info(8)->paused);
    EXPECT_EQ(run({"xen-dump-sim", "unpause", h.dir.string(), "8"}).exit_code, 1);  // not paused
    ASSERT_EQ(run({"xen-dump-sim", "pause", h.dir.string(), "8"}).exit_code, 0);
    EXPECT_TRUE(h.hv->domain_info(8)->paused);

    ASSERT_EQ(run({"xen-dump-sim", "crash", h.dir.string(), "7"}).exit_code, 0);
    EXPECT_TRUE(other->domain_info(7)->crashed());
    EXPECT_EQ(run({"xen-dump-sim", "crash", h.dir.string(), "7"}).exit_code, 1);
    // A crashed domain can still be mapped (that is what a dump needs).
    EXPECT_EQ(read_frame(*other, 7, 0x100000).error, 0);

    ASSERT_EQ(run({"xen-dump-sim", "destroy", h.dir.string(), "7"}).exit_code, 0);
    EXPECT_FALSE(other->domain_info(7));
    EXPECT_EQ(other->list_domains().size(), 1u);
    std::vector<uint64_t> f = {0x100000};
    EXPECT_THROW(other->map_foreign(7, f), Error);
    EXPECT_EQ(run({"xen-dump-sim", "info", h.dir.string(), "7", "--json"}).exit_code, 1);
}

TEST(SimState, BalloonInvalidatesP2mAndOwnership) {
    Host h(two_domains());
    auto other = open_hypervisor(h.host());
    ASSERT_EQ(read_frame(*other, 7, 0x200000 + 10).error, 0);  // pfn 266
    auto r = run({"xen-dump-sim", "balloon", h.dir.string(), "7", "264", "8"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(other->domain_info(7)->tot_pages, 4000u - 8);
    EXPECT_NE(read_frame(*other, 7, 0x200000 + 10).error, 0);
    EXPECT_EQ(read_frame(*other, 7, 0x200000 + 16).error, 0);  // pfn 272 stays
    ArchSharedInfo a = read_arch_shared_info(*other, 7);
    auto p2m = walk_tree(*other, 7, a);
    json dom = two_domains()["domains"][0];
    auto want = expected_p2m(dom, 8);
    for (uint64_t p = 264; p < 272; ++p) want[p] = ~uint64_t{0};
    EXPECT_EQ(p2m, want);
    // Twice, a hole, a p2m page: refused.
    EXPECT_EQ(run({"xen-dump-sim", "balloon", h.dir.string(), "7", "264", "1"}).exit_code, 1);
    EXPECT_EQ(run({"xen-dump-sim", "balloon", h.dir.string(), "7", "200", "1"}).exit_code, 1);
    auto info = json::parse(run({"xen-dump-sim", "info", h.dir.string(), "7", "--json"}).out);
    EXPECT_EQ(info["nr_pages"], 4000 - 8);
    uint64_t p2m_pfn = info["p2m_pfns"][0];
    auto refused = run({"xen-dump-sim", "balloon", h.dir.string(), "7", std::to_string(p2m_pfn), "1"});
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_NE(refused.err.find("p2m"), std::string::npos) << refused.err;
    // HVM: the gfns become unpopulated.
    ASSERT_EQ(run({"xen-dump-sim", "balloon", h.dir.string(), "8", "0", "2"}).exit_code, 0);
    EXPECT_NE(read_frame(*other, 8, 1).error, 0);
    EXPECT_EQ(read_frame(*other, 8, 2).error, 0);
}

TEST(SimState, WatchFiresAfterCrashInAnotherProcess) {
    Host h(two_domains());
    auto watch = h.hv->watch_domains();
    EXPECT_FALSE(readable(watch->fd()));
    ASSERT_EQ(run({"xen-dump-sim", "pause", h.dir.string(), "7"}).exit_code, 0);
    EXPECT_FALSE(readable(watch->fd()));  // pausing is no @releaseDomain event
    ASSERT_EQ(run({"xen-dump-sim", "crash", h.dir.string(), "7"}).exit_code, 0);
    pollfd p{watch->fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1);
    EXPECT_TRUE(watch->consume());
    EXPECT_FALSE(watch->consume());
    EXPECT_FALSE(readable(watch->fd()));
    h.hv->destroy(8);
    EXPECT_TRUE(readable(watch->fd()));
    EXPECT_TRUE(watch->consume());
}

TEST(SimState, PausesNestAsXens) {
    // Xen counts toolstack pauses (controller_pause_count): the domain runs
    // again only when each pause was undone, an unpause of a running domain
    // fails (EINVAL), and more than 255 nested pauses are refused.
    Host h(two_domains());
    auto other = open_hypervisor(h.host());
    h.hv->pause(7);
    other->pause(7);
    ASSERT_EQ(run({"xen-dump-sim", "pause", h.dir.string(), "7"}).exit_code, 0);
    EXPECT_EQ(pause_count(h, 7), 3u);
    h.hv->unpause(7);
    other->unpause(7);
    EXPECT_TRUE(h.hv->domain_info(7)->paused);
    ASSERT_EQ(run({"xen-dump-sim", "unpause", h.dir.string(), "7"}).exit_code, 0);
    EXPECT_FALSE(other->domain_info(7)->paused);
    try {
        h.hv->unpause(7);
        ADD_FAILURE() << "unpaused a running domain";
    } catch (const Error& e) {
        EXPECT_EQ(e.sys_errno(), EINVAL);
    }
    for (int i = 0; i < 255; ++i) h.hv->pause(7);
    try {
        h.hv->pause(7);
        ADD_FAILURE() << "a 256th pause was taken";
    } catch (const Error& e) {
        EXPECT_EQ(e.sys_errno(), EOVERFLOW);
    }
    EXPECT_EQ(pause_count(h, 7), 255u);
    {
        // PausedDomain takes one and gives back one, whoever else holds some.
        for (int i = 0; i < 250; ++i) h.hv->unpause(7);
        PausedDomain p(*h.hv, 7);
        EXPECT_EQ(pause_count(h, 7), 6u);
        p.release();
        p.release();  // once only
        EXPECT_EQ(pause_count(h, 7), 5u);
    }
    EXPECT_EQ(pause_count(h, 7), 5u);
}

TEST(SimState, ListAndInfoJson) {
    Host h(two_domains());
    auto r = run({"xen-dump-sim", "list", h.dir.string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json list = json::parse(r.out);
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[0]["domid"], 7);
    EXPECT_EQ(list[0]["name"], "web01");
    EXPECT_EQ(list[0]["state"], "running");
    EXPECT_EQ(list[0]["nr_pages"], 4000);
    EXPECT_EQ(list[1]["state"], "paused");
    auto text = run({"xen-dump-sim", "list", h.dir.string()});
    EXPECT_NE(text.out.find("web01"), std::string::npos);

    json info = json::parse(run({"xen-dump-sim", "info", h.dir.string(), "web01", "--json"}).out);
    json spec = two_domains()["domains"][0];
    for (auto& [k, v] : spec.items()) EXPECT_EQ(info[k], v) << k;
    EXPECT_EQ(info["p2m_format"], "tree");
    EXPECT_EQ(info["guest_width"], 8);
    EXPECT_EQ(info["memory"], json({{"fill", "pattern"}}));
    EXPECT_EQ(info["nr_pages"], 4000);
    EXPECT_EQ(info["p2m_pfns"].size(), 8u + 1 + 1);  // 8 p2m pages, a frame list, the root
    EXPECT_EQ(info["p2m_pfns"].back(), 4095);        // highest present pfns
    EXPECT_TRUE(info.contains("shared_info_mfn"));
}

TEST(SimState, UsageAndHelp) {
    EXPECT_EQ(run({"xen-dump-sim", "--help"}).exit_code, 0);
    EXPECT_EQ(run({"xen-dump-sim"}).exit_code, 2);
    EXPECT_EQ(run({"xen-dump-sim", "frobnicate", "/tmp"}).exit_code, 2);
    EXPECT_EQ(run({"xen-dump-sim", "balloon", "/tmp", "1", "x", "2"}).exit_code, 2);
    TempDir t;
    EXPECT_EQ(run({"xen-dump-sim", "list", (t / "nothing").string()}).exit_code, 1);
    EXPECT_THROW(open_hypervisor("sim:" + (t / "nothing").string()), Error);
    EXPECT_THROW(open_hypervisor("bogus"), Error);
}

struct BadSpec {
    const char* name;
    json spec;
    const char* expect;  // part of the message
};

class SimBadSpec : public ::testing::TestWithParam<BadSpec> {};

TEST_P(SimBadSpec, IsRefusedWithAClearMessage) {
    const auto& c = GetParam();
    TempDir t;
    std::ofstream(t / "spec.json") << c.spec.dump();
    auto r = run({"xen-dump-sim", "create", (t / "host").string(), (t / "spec.json").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(t / "host" / "host.json"));
}

json dom(json extra) {
    json d = {{"domid", 1}, {"p2m_size", 1024}, {"extents", {{0, 0x1000, 1024}}}};
    for (auto& [k, v] : extra.items()) d[k] = v;
    return d;
}

INSTANTIATE_TEST_SUITE_P(
    Specs, SimBadSpec,
    ::testing::Values(
        BadSpec{"overlapping_mfns_across_domains",
                {{"domains", {dom({}), dom({{"domid", 2}, {"extents", {{0, 0x13ff, 10}}}})}}},
                "machine frames 0x13ff"},
        BadSpec{"extent_outside_p2m_size", {{"domains", {dom({{"extents", {{1000, 0x1000, 100}}}})}}}, "outside p2m_size"},
        BadSpec{"overlapping_pfns", {{"domains", {dom({{"extents", {{0, 0x1000, 10}, {5, 0x9000, 10}}}})}}}, "overlaps"},
        BadSpec{"unknown_key", {{"domains", {dom({{"colour", "red"}})}}}, "unknown key \"colour\""},
        BadSpec{"bad_type", {{"domains", {dom({{"type", "kvm"}})}}}, "type \"kvm\""},
        BadSpec{"bad_width", {{"domains", {dom({{"guest_width", 2}})}}}, "guest_width 2"},
        BadSpec{"hvm_width4", {{"domains", {dom({{"type", "hvm"}, {"guest_width", 4}})}}}, "PV guests only"},
        BadSpec{"duplicate_domid", {{"domains", {dom({}), dom({{"extents", {{0, 0x9000, 1}}}})}}}, "used twice"},
        BadSpec{"bad_uuid", {{"domains", {dom({{"uuid", "xyz"}})}}}, "uuid"},
        BadSpec{"p2m_pages_at_hole", {{"domains", {dom({{"extents", {{0, 0x1000, 10}}}, {"p2m_pages_at", 500}})}}},
                "p2m_pages_at 500"},
        BadSpec{"p2m_pages_at_too_few",
                {{"domains", {dom({{"extents", {{0, 0x1000, 10}, {512, 0x2000, 512}}}, {"p2m_pages_at", 8}})}}},
                "is a hole"},
        BadSpec{"mfn_too_big_for_32bit", {{"domains", {dom({{"guest_width", 4}, {"extents", {{0, 0xffffff00, 1024}}}})}}},
                "32-bit"},
        BadSpec{"missing_image", {{"domains", {dom({{"memory", {{"image", "/nonexistent.img"}}}})}}}, "memory.image"},
        BadSpec{"bad_state", {{"domains", {dom({{"state", "sleeping"}})}}}, "state \"sleeping\""},
        BadSpec{"negative", {{"domains", {dom({{"vcpus", -1}})}}}, "vcpus"},
        BadSpec{"not_json_object", json::array(), "expected an object"}),
    [](const auto& info) { return std::string(info.param.name); });

// The host's files are read one way (sim/json_file.hpp): a corrupt one is
// named, with the offset of a syntax error; a field of the wrong type too.
TEST(SimState, CorruptFilesAreNamedWithTheOffset) {
    TempDir t;
    std::ofstream(t / "spec.json") << "{\"domains\": [}";
    auto r = run({"xen-dump-sim", "create", (t / "host").string(), (t / "spec.json").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find((t / "spec.json").string() + ": at offset 0xe: not valid JSON: "), std::string::npos) << r.err;

    Host h(two_domains());
    const auto domain_json = h.dir / "domains" / "7" / "domain.json", state_json = h.dir / "domains" / "8" / "state.json";
    std::ofstream(state_json) << "{\"pause_count\": \"many\"}";
    try {
        open_hypervisor(h.host())->domain_info(8);
        ADD_FAILURE() << "a corrupt state file was read";
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), state_json.string());
        EXPECT_NE(e.message().find("corrupt domain state: "), std::string::npos) << e.what();
    }
    std::ofstream(domain_json) << "{\"spec\": ";
    try {
        open_hypervisor(h.host());
        ADD_FAILURE() << "a truncated domain description was read";
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), domain_json.string());
        EXPECT_TRUE(e.offset().has_value()) << e.what();
        EXPECT_NE(e.message().find("corrupt domain description: "), std::string::npos) << e.what();
    }
}

TEST(SimState, CreateRefusesNonEmptyDir) {
    TempDir t;
    std::ofstream(t / "spec.json") << json{{"domains", json::array()}}.dump();
    std::filesystem::create_directory(t / "host");
    std::ofstream(t / "host" / "x") << "x";
    auto r = run({"xen-dump-sim", "create", (t / "host").string(), (t / "spec.json").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("not empty"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace xendump::test::sim
