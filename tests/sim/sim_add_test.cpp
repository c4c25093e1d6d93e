// xen-dump-sim add (issue 36 item 6): guests added to a host that exists, as
// xl create adds one to a running host. An open Hypervisor sees them at its
// next lookup; their memory and p2m read as a created guest's; they dump and
// verify; a spec that reuses an id, a live name, a machine frame or a
// shared_info page of the host is refused and adds nothing. The tree's
// example specs (sim/examples) create and add.
#include <poll.h>

#include <fstream>
#include <set>

#include "sim_test_util.hpp"

namespace xendump::test::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json host_spec() {
    return {{"xen_version", "4.17.0"},
            {"domains",
             {{{"domid", 7},
               {"name", "web01"},
               {"type", "pv"},
               {"p2m_size", 4096},
               {"extents", {{0, 0x100000, 160}, {256, 0x200000, 3840}}}},
              {{"domid", 8}, {"name", "db01"}, {"type", "hvm"}, {"p2m_size", 2048}}}}};
}

RunResult add(const Host& h, const json& spec) {
    const fs::path file = h.tmp / "add.json";
    std::ofstream(file) << spec.dump(2);
    return run({"xen-dump-sim", "add", h.dir.string(), file.string()});
}

size_t listed(const Host& h) {
    RunResult r = run({"xen-dump-sim", "list", h.dir.string(), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out).size();
}

TEST(SimAdd, AnOpenHostSeesAddedGuestsTheirMemoryAndTheirCrash) {
    Host h(host_spec());
    auto watch = h.hv->watch_domains();
    RunResult r = add(h, {{"domains",
                           {{{"domid", 9}, {"name", "app01"}, {"type", "pvh"}, {"p2m_size", 1024}},
                            {{"domid", 10}, {"name", "pv02"}, {"type", "pv"}, {"p2m_size", 2048}}}}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(h.hv->list_domains().size(), 4u);
    auto d9 = h.hv->domain_info(9);
    ASSERT_TRUE(d9);
    EXPECT_TRUE(d9->pvh);
    EXPECT_EQ(h.hv->domain_name(10), "pv02");
    EXPECT_EQ(h.hv->find_domain_by_name("app01"), 9u);
    // PVH: frames are gfns; the pattern of domain 9.
    Frame f = read_frame(*h.hv, 9, 5);
    ASSERT_EQ(f.error, 0);
    EXPECT_EQ(word(f.bytes.data(), 8), expected_word(9, 5, 1));
    // Every shared_info page is its own domain's.
    std::set<uint64_t> shared;
    for (const auto& d : h.hv->list_domains()) EXPECT_TRUE(shared.insert(d.shared_info_frame).second);
    // The added PV guest's p2m tree, walked as a dump tool does.
    const auto p2m = walk_tree(*h.hv, 10, read_arch_shared_info(*h.hv, 10));
    ASSERT_GE(p2m.size(), 2048u);
    Frame p = read_frame(*h.hv, 10, p2m[100]);
    ASSERT_EQ(p.error, 0);
    EXPECT_EQ(word(p.bytes.data(), 0), expected_word(10, 100, 0));

    // It dumps and verifies like any guest.
    const fs::path dump = h.tmp / "pv02.core";
    RunResult d = run({"xen-dumpd", "--host", h.host(), "--domain", "pv02", "-o", dump.string()});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    RunResult v = run({"xen-dumpctl", "verify", dump.string()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;

    watch->consume();
    ASSERT_EQ(run({"xen-dump-sim", "crash", h.dir.string(), "app01"}).exit_code, 0);
    pollfd pfd{watch->fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&pfd, 1, 5000), 1);
    EXPECT_TRUE(watch->consume());
    EXPECT_TRUE(h.hv->domain_info(9)->shutdown);
}

TEST(SimAdd, ASpecTheHostContradictsIsRefusedAndAddsNothing) {
    Host h(host_spec());
    RunResult info = run({"xen-dump-sim", "info", h.dir.string(), "7", "--json"});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    const uint64_t shared_info = json::parse(info.out).at("shared_info_mfn").get<uint64_t>();
    struct Case {
        const char* what;
        json domain;
        const char* said;
    };
    const Case cases[] = {
        {"an id the host has", {{"domid", 7}, {"name", "new"}, {"type", "hvm"}, {"p2m_size", 256}}, "domain 7"},
        {"a live name", {{"domid", 20}, {"name", "db01"}, {"type", "hvm"}, {"p2m_size", 256}}, "\"db01\""},
        {"a machine frame of domain 7",
         {{"domid", 20}, {"name", "new"}, {"type", "hvm"}, {"p2m_size", 256}, {"extents", {{0, 0x100010, 16}}}},
         "machine frames"},
        {"a shared_info page",
         {{"domid", 20}, {"name", "new"}, {"type", "hvm"}, {"p2m_size", 256}, {"extents", {{0, shared_info, 1}}}},
         "shared_info"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        RunResult r = add(h, {{"domains", {c.domain}}});
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find(c.said), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("add.json"), std::string::npos) << r.err;  // the spec is named
        EXPECT_EQ(listed(h), 2u);
        EXPECT_FALSE(fs::exists(h.dir / "domains" / "20"));
    }
    // A domain destroyed leaves its name free, not its id.
    ASSERT_EQ(run({"xen-dump-sim", "destroy", h.dir.string(), "db01"}).exit_code, 0);
    RunResult again = add(h, {{"domains", {{{"domid", 21}, {"name", "db01"}, {"type", "hvm"}, {"p2m_size", 256}}}}});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(h.hv->find_domain_by_name("db01"), 21u);
}

TEST(SimAdd, TheTreesExampleHostCreatesAndTakesItsAddedGuest) {
    TempDir tmp;
    const fs::path dir = tmp / "host", examples = source_root() / "sim" / "examples";
    RunResult c = run({"xen-dump-sim", "create", dir.string(), (examples / "host.json").string()});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    RunResult a = run({"xen-dump-sim", "add", dir.string(), (examples / "add.json").string()});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    RunResult l = run({"xen-dump-sim", "list", dir.string(), "--json"});
    ASSERT_EQ(l.exit_code, 0) << l.err;
    std::set<std::string> types;
    std::set<uint64_t> sizes;
    for (const auto& d : json::parse(l.out)) {
        types.insert(d.at("type").get<std::string>());
        sizes.insert(d.at("nr_pages").get<uint64_t>());
    }
    EXPECT_EQ(types, (std::set<std::string>{"pv", "pvh", "hvm"}));
    EXPECT_GE(sizes.size(), 4u);
    EXPECT_EQ(json::parse(l.out).size(), 6u);
}

}  // namespace
}  // namespace xendump::test::sim
