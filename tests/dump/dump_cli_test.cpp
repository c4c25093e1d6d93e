// Issue 3: `xen-dumpd --domain` as a command: exit codes, default names, the
// domain unpaused on every exit path, no hypervisor.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "dump_support.hpp"
#include "xendump/fd.hpp"

extern char** environ;

namespace xendump::test::dump {
namespace {

namespace fs = std::filesystem;

json small_pv(uint32_t domid) {
    return pv_domain(domid, 8, "tree", 4096,
                     json::array({json::array({0, 0x100000 + domid * 0x10000, 4000})}));
}

std::vector<fs::path> files_in(const fs::path& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
    return out;
}

// The dumps in a dump directory (the sidecars beside them are not counted).
std::vector<fs::path> dumps_in(const fs::path& dir) {
    std::vector<fs::path> out;
    for (const auto& p : files_in(dir))
        if (p.extension() == ".core") out.push_back(p);
    return out;
}

TEST(DumpCli, DefaultNameInDumpDirAndPrintsPath) {
    sim::Host host(host_spec({small_pv(7)}));
    TempDir dir;
    auto r = run({"xen-dumpd", "--host", host.host(), "--domain", "guest7", "--dump-dir", dir.path().string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto files = dumps_in(dir.path());
    ASSERT_EQ(files.size(), 1u);
    EXPECT_TRUE(fs::exists(files[0].string() + ".json")) << "no sidecar beside the dump";
    std::string name = files[0].filename().string();
    EXPECT_TRUE(name.starts_with("guest7-7-")) << name;
    EXPECT_TRUE(name.ends_with("Z.core")) << name;
    EXPECT_NE(r.out.find(files[0].string()), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find('\r'), std::string::npos) << "progress bar printed on a pipe";
    // A second dump never overwrites the first.
    auto r2 = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "--dump-dir", dir.path().string()});
    ASSERT_EQ(r2.exit_code, 0) << r2.err;
    EXPECT_EQ(dumps_in(dir.path()).size(), 2u);
}

TEST(DumpCli, NoSuchDomain) {
    sim::Host host(host_spec({small_pv(7)}));
    TempDir dir;
    auto r = run({"xen-dumpd", "--host", host.host(), "--domain", "nosuch", "-o", (dir / "x.core").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("nosuch"), std::string::npos) << r.err;
    EXPECT_TRUE(files_in(dir.path()).empty());
}

TEST(DumpCli, UnpausedAfterAFailedDump) {
    sim::Host host(host_spec({small_pv(7)}));
    TempDir dir;
    fs::create_directory(dir / "ro");
    // The output exists already: the dump fails after the domain was paused
    // and discovered; it must be running again and the old file untouched.
    { std::ofstream(dir / "ro" / "taken.core") << "keep me"; }
    auto r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "-o", (dir / "ro" / "taken.core").string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_FALSE(host.hv->domain_info(7)->paused);
    std::ifstream in(dir / "ro" / "taken.core");
    std::string s;
    std::getline(in, s);
    EXPECT_EQ(s, "keep me");
    EXPECT_EQ(files_in(dir / "ro").size(), 1u);
}

TEST(DumpCli, NoHypervisorIsOneClearLine) {
    if (fs::exists("/dev/xen/privcmd")) GTEST_SKIP() << "this machine runs Xen";
    auto r = run({"xen-dumpd", "--host", "xen", "--domain", "1", "-o", "/tmp/never.core"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_GT(r.exit_code, 0) << "killed by a signal";
    std::string err = r.err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    EXPECT_FALSE(err.empty());
    EXPECT_EQ(err.find('\n'), std::string::npos) << "more than one line: " << r.err;
    EXPECT_FALSE(fs::exists("/tmp/never.core"));
}

// SIGTERM and SIGINT mid-dump: no partial file, the domain unpaused, exit non-zero.
class DumpCliSignal : public ::testing::TestWithParam<int> {};

TEST_P(DumpCliSignal, CancelledCleanly) {
    json dom = small_pv(7);
    dom["map_cost"] = json{{"per_call_us", 0}, {"per_page_ns", 2000000}};  // 2 ms a page: ~8 s in all
    sim::Host host(host_spec({dom}));
    TempDir dir;
    std::string prog = build_program("xen-dumpd").string();
    std::string out = (dir / "sig.core").string();
    std::string hostarg = host.host();
    std::vector<char*> argv = {prog.data(), const_cast<char*>("--host"), hostarg.data(),
                               const_cast<char*>("--domain"), const_cast<char*>("7"),
                               const_cast<char*>("-o"), out.data(), const_cast<char*>("--quiet"), nullptr};
    pid_t pid;
    ASSERT_EQ(posix_spawn(&pid, prog.c_str(), nullptr, nullptr, argv.data(), environ), 0);
    // Wait until the dump has paused the domain (it is under way).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!host.hv->domain_info(7)->paused && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(host.hv->domain_info(7)->paused) << "the dump never paused the domain";
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(pid, GetParam());
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a cancelled dump reported success";
    EXPECT_FALSE(host.hv->domain_info(7)->paused) << "domain left paused";
    EXPECT_TRUE(files_in(dir.path()).empty()) << "a partial file or temporary remains";
}

INSTANTIATE_TEST_SUITE_P(Signals, DumpCliSignal, ::testing::Values(SIGTERM, SIGINT),
                         [](const auto& info) { return info.param == SIGTERM ? "SIGTERM" : "SIGINT"; });

TEST(DumpCli, LiveDumpRecordsPausedZero) {
    sim::Host host(host_spec({small_pv(7)}));
    TempDir dir;
    auto r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "--live", "-o", (dir / "l.core").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto rd = DumpReader::open(dir / "l.core");
    EXPECT_EQ(rd.domain().get("PAUSED"), "0");
    EXPECT_EQ(rd.domain().get("REASON"), "request");
}

}  // namespace
}  // namespace xendump::test::dump
