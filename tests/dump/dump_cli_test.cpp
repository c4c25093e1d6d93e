// Issue 3: `xen-dumpd --domain` as a command: exit codes, default names, the
// domain unpaused on every exit path, no hypervisor.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <optional>
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

// Issue 16.3: also SIGHUP (the terminal or the ssh session went away) and SIGQUIT.
INSTANTIATE_TEST_SUITE_P(Signals, DumpCliSignal, ::testing::Values(SIGTERM, SIGINT, SIGHUP, SIGQUIT),
                         [](const auto& info) { return "SIG" + std::string(sigabbrev_np(info.param)); });

// A child process of the test: xen-dumpd with standard output to `out_fd`
// (-1: /dev/null) and standard error to /dev/null.
struct Child {
    pid_t pid = -1;

    Child(const std::vector<std::string>& args, int out_fd) {
        std::vector<std::string> a = args;
        a.insert(a.begin(), build_program("xen-dumpd").string());
        std::vector<char*> argv;
        for (auto& s : a) argv.push_back(s.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        if (out_fd >= 0) posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
        else posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
        if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid = -1;
        posix_spawn_file_actions_destroy(&fa);
    }
    ~Child() {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    }
    // The wait status once the child ended within `limit`, else nullopt (still running).
    std::optional<int> wait_for(std::chrono::milliseconds limit, struct rusage* usage = nullptr) {
        auto deadline = std::chrono::steady_clock::now() + limit;
        struct rusage ignored {};
        for (;;) {
            int status = 0;
            if (wait4(pid, &status, WNOHANG, usage ? usage : &ignored) == pid) {
                pid = -1;
                return status;
            }
            if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
};

bool wait_paused(sim::Host& host, uint32_t domid, bool paused = true) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (host.hv->domain_info(domid)->paused != paused && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return host.hv->domain_info(domid)->paused == paused;
}

// Exited by itself, unsuccessfully (not killed by a signal).
void expect_failed_exit(const std::optional<int>& status) {
    ASSERT_TRUE(status) << "still running";
    EXPECT_TRUE(WIFEXITED(*status)) << "killed by signal " << (WIFSIGNALED(*status) ? WTERMSIG(*status) : 0);
    EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "reported success";
}

// `xen-dumpd --domain 7 -o -` of a small guest into a pipe the test reads.
struct PipedDump {
    sim::Host host{host_spec({small_pv(7)})};
    UniqueFd read_end;
    std::optional<Child> child;

    PipedDump() {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");  // the child holds only its stdout end
        read_end = UniqueFd(p[0]);
        child.emplace(std::vector<std::string>{"--host", host.host(), "--domain", "7", "-o", "-", "--quiet"}, p[1]);
        close(p[1]);
        if (child->pid <= 0) throw std::runtime_error("cannot start xen-dumpd");
    }
};

TEST(DumpCliPipe, ReaderGoneUnpausesTheDomain) {
    // xen-dumpd --domain 7 -o - | head -c 65536: the reader leaves; SIGPIPE
    // must not kill the dumper with the domain paused.
    PipedDump d;
    std::vector<char> buf(65536);
    size_t got = 0;
    while (got < buf.size()) {
        ssize_t n = read(d.read_end.get(), buf.data() + got, buf.size() - got);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    EXPECT_EQ(got, buf.size());
    d.read_end.reset();
    expect_failed_exit(d.child->wait_for(std::chrono::seconds(30)));
    EXPECT_FALSE(d.host.hv->domain_info(7)->paused) << "domain left paused";
}

TEST(DumpCliPipe, SigtermWhileTheReaderStallsUnpauses) {
    // The reader stops reading (a hung ssh): the writer blocks on a full
    // pipe. SIGTERM must still end the dump and unpause the domain.
    PipedDump d;
    ASSERT_TRUE(wait_paused(d.host, 7));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // blocked on the full pipe by now
    kill(d.child->pid, SIGTERM);
    expect_failed_exit(d.child->wait_for(std::chrono::seconds(10)));
    EXPECT_FALSE(d.host.hv->domain_info(7)->paused) << "domain left paused";
}

TEST(DumpCliSignal, SigtermDuringTheP2mWalkIsPrompt) {
    // An HVM guest whose gfn probing is slow (a quarter of a second per
    // mapping call, 48 calls): SIGTERM during the p2m walk ends the dump
    // within a mapping call or two, not after the walk.
    json dom = hvm_domain(12, "hvm", 48 * 8192, json::array({json::array({0, 0x400000, 0xA0})}));
    dom["map_cost"] = json{{"per_call_us", 250000}, {"per_page_ns", 0}};
    sim::Host host(host_spec({dom}));
    TempDir dir;
    Child child({"--host", host.host(), "--domain", "12", "-o", (dir / "x.core").string(), "--quiet"}, -1);
    ASSERT_GT(child.pid, 0);
    ASSERT_TRUE(wait_paused(host, 12));
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    kill(child.pid, SIGTERM);
    const auto t0 = std::chrono::steady_clock::now();
    auto status = child.wait_for(std::chrono::seconds(60));
    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    expect_failed_exit(status);
    EXPECT_LT(seconds, 4.0) << "the cancel waited for the p2m walk (about 11 s)";
    EXPECT_FALSE(host.hv->domain_info(12)->paused) << "domain left paused";
    EXPECT_TRUE(files_in(dir.path()).empty());
}

TEST(DumpCli, LiveDumpRecordsPausedZero) {
    sim::Host host(host_spec({small_pv(7)}));
    TempDir dir;
    auto r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "--live=inconsistent", "-o",
                  (dir / "l.core").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto rd = DumpReader::open(dir / "l.core");
    EXPECT_EQ(rd.domain().get("PAUSED"), "0");
    EXPECT_EQ(rd.domain().get("LIVE"), "inconsistent");
    EXPECT_EQ(rd.domain().get("REASON"), "request");
    // --live is consistent (issue 35): a PV guest on a hypervisor without
    // shadow paging cannot be, and the command says so instead.
    r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "--live", "-o", (dir / "c.core").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("shadow paging"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "c.core"));
}


// Whether two files hold the same bytes, read a chunk at a time: the test
// process stays small (a program it starts inherits its peak RSS, which the
// memory tests below measure).
bool same_bytes(const fs::path& a, const fs::path& b) {
    if (fs::file_size(a) != fs::file_size(b)) return false;
    std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
    std::vector<char> ca(1 << 20), cb(1 << 20);
    while (fa && fb) {
        fa.read(ca.data(), static_cast<std::streamsize>(ca.size()));
        fb.read(cb.data(), static_cast<std::streamsize>(cb.size()));
        if (fa.gcount() != fb.gcount() || std::memcmp(ca.data(), cb.data(), static_cast<size_t>(fa.gcount())) != 0)
            return false;
    }
    return fa.eof() && fb.eof();
}

// --threads: a dump's bytes do not depend on the number of threads, in a
// file or on a pipe. Dumps made in different seconds differ in TIME= (and
// the digest over the notes): the three dumps run at once, so that they
// start in the same second, and a set that straddles a second is made again.
TEST(DumpCli, ThreadsOneAndTwoWriteTheSameBytes) {
    sim::Host host(host_spec({pv_domain(7, 8, "tree", 12000, json::array({json::array({0, 0x100000, 11000})}))}));
    TempDir dir;
    const auto time = [](const fs::path& p) { return DumpReader::open(p).domain().get("TIME"); };
    bool same_second = false;
    for (int attempt = 0; attempt < 20 && !same_second; ++attempt) {
        for (const auto& f : files_in(dir.path())) fs::remove(f);
        const std::string prog = build_program("xen-dumpd").string();
        const std::vector<std::string> common = {prog, "--host", host.host(), "--domain", "7"};
        auto with = [&](std::vector<std::string> extra) {
            extra.insert(extra.begin(), common.begin(), common.end());
            return extra;
        };
        // On a pipe (the shell's redirection keeps the bytes out of this process).
        std::vector<std::string> piped = {"sh", "-c", "exec \"$@\" | cat > " + (dir / "3.core").string(), "sh"};
        for (const auto& w : with({"--threads", "2", "-o", "-"})) piped.push_back(w);
        auto a1 = std::async(std::launch::async, [&] { return run(with({"--threads", "1", "-o", (dir / "1.core").string()})); });
        auto a2 = std::async(std::launch::async, [&] { return run(with({"--threads=2", "-o", (dir / "2.core").string()})); });
        auto r3 = run(piped);
        auto r1 = a1.get(), r2 = a2.get();
        ASSERT_EQ(r1.exit_code, 0) << r1.err;
        ASSERT_EQ(r2.exit_code, 0) << r2.err;
        ASSERT_EQ(r3.exit_code, 0) << r3.err;
        same_second = time(dir / "1.core") == time(dir / "2.core") && time(dir / "2.core") == time(dir / "3.core");
    }
    ASSERT_TRUE(same_second) << "20 sets of three dumps started together, none written within one second";
    ASSERT_GT(fs::file_size(dir / "1.core"), 11000u * 4096);
    EXPECT_TRUE(same_bytes(dir / "1.core", dir / "2.core")) << "--threads 1 and --threads 2 wrote different files";
    EXPECT_TRUE(same_bytes(dir / "1.core", dir / "3.core")) << "the pipe's bytes differ from the file's";
}

TEST(DumpCli, BadThreadsIsAOneLineUsageError) {
    sim::Host host(host_spec({small_pv(7)}));
    TempDir dir;
    for (const std::string bad : {"0", "65", "two", "-1", ""}) {
        // The one-shot dump and the service alike, before anything starts.
        for (bool one_shot : {true, false}) {
            std::vector<std::string> argv = {"xen-dumpd", "--host", host.host(), "--threads=" + bad};
            if (one_shot) argv.insert(argv.end(), {"--domain", "7", "-o", (dir / "t.core").string()});
            else argv.insert(argv.end(), {"--socket", (dir / "sock").string(), "--dump-dir", dir.path().string()});
            auto r = run(argv);
            EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
            EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
            EXPECT_NE(r.err.find("--threads wants a number from 1 to 64, not '" + bad + "'"), std::string::npos) << r.err;
            EXPECT_TRUE(files_in(dir.path()).empty()) << bad;
        }
    }
}


TEST(DumpCliService, SigtermWhileWaitingOnTheServiceCancelsTheRequest) {
    // Issue 16.9: the one-shot hands the dump to the running service and
    // waits; SIGTERM (Ctrl-C) ends the wait at once and cancels the dump.
    json dom = pv_domain(7, 8, "tree", 16384, json::array({json::array({0, 0x100000, 16000})}));
    dom["map_cost"] = json{{"per_call_us", 0}, {"per_page_ns", 1000000}};  // 1 ms a page: ~16 s in all
    sim::Host host(host_spec({dom}));
    TempDir dir;
    fs::create_directory(dir / "dumps");
    std::ofstream(dir / "xen-dumpd.conf") << "[Dump]\n";
    const fs::path socket = dir / "control.sock";
    const std::vector<std::string> common = {"--config", (dir / "xen-dumpd.conf").string(), "--host", host.host(),
                                             "--dump-dir", (dir / "dumps").string(), "--socket", socket.string()};
    Child service(common, -1);
    ASSERT_GT(service.pid, 0);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!fs::exists(socket) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(fs::exists(socket)) << "the service did not start";

    std::vector<std::string> args = common;
    args.insert(args.end(), {"--domain", "7"});
    Child one(args, -1);
    ASSERT_GT(one.pid, 0);
    ASSERT_TRUE(wait_paused(host, 7)) << "the service never started the dump";
    kill(one.pid, SIGTERM);
    expect_failed_exit(one.wait_for(std::chrono::seconds(5)));
    // The service dropped the dump: the domain runs again, no dump remains.
    EXPECT_TRUE(wait_paused(host, 7, false)) << "the service's dump went on";
    // The domain is unpaused as the cancelled dump unwinds; the name it had
    // reserved in the dump directory goes a moment later.
    const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!dumps_in(dir / "dumps").empty() && std::chrono::steady_clock::now() < gone_by)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(dumps_in(dir / "dumps").empty());
    kill(service.pid, SIGTERM);
    EXPECT_TRUE(service.wait_for(std::chrono::seconds(30)));
}

TEST(DumpCliHostile, VmcoreinfoFloodDoesNotStallTheDump) {
    // Issue 16.4: an HVM guest whose 32768 pages each hold a different valid
    // VMCOREINFO-like text of one length. The old scanner kept every copy
    // and compared each text with every other (77 s and 466 MB) while the
    // guest stayed paused. Now: bounded memory, the dump done in seconds,
    // VMCOREINFO left out with a warning (nothing witnesses any of them).
    constexpr uint64_t kPages = 32768;
    TempDir dir;
    const fs::path image = dir / "flood.raw";
    {
        std::string base =
            "OSRELEASE=6.1.0-flood\nPAGESIZE=4096\nSYMBOL(swapper_pg_dir)=ffffffff82a10000\n"
            "SYMBOL(init_uts_ns)=ffffffff82bfb000\nOFFSET(uts_namespace.name)=0\n";
        for (unsigned k = 0; base.size() < 3800; ++k) {
            char line[64];
            std::snprintf(line, sizeof line, "SYMBOL(filler_symbol_%04u)=ffffffff81%06x\n", k, k);
            base += line;
        }
        std::ofstream out(image, std::ios::binary);
        std::vector<char> page(4096);
        for (uint64_t pfn = 0; pfn < kPages; ++pfn) {
            std::fill(page.begin(), page.end(), '\0');
            char last[64];
            std::snprintf(last, sizeof last, "NUMBER(look_alike)=%010llu\n", static_cast<unsigned long long>(pfn));
            const std::string text = base + last;
            std::memcpy(page.data(), text.data(), text.size());
            out.write(page.data(), static_cast<std::streamsize>(page.size()));
        }
    }
    json dom = hvm_domain(12, "hvm", kPages, json::array({json::array({0, 0x400000, kPages})}));
    dom["memory"] = json{{"image", image.string()}};
    sim::Host host(host_spec({dom}));
    const fs::path core = dir / "flood.core";
    Child child({"--host", host.host(), "--domain", "12", "-o", core.string()}, -1);
    ASSERT_GT(child.pid, 0);
    struct rusage usage {};
    auto status = child.wait_for(std::chrono::seconds(40), &usage);
    ASSERT_TRUE(status) << "the dump is stalled by the look-alikes";
    ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
    EXPECT_LT(usage.ru_maxrss, 200L * 1024) << "peak RSS in KiB: memory grows with the look-alikes";
    EXPECT_FALSE(host.hv->domain_info(12)->paused);
    auto rd = DumpReader::open(core);
    EXPECT_FALSE(rd.vmcoreinfo()) << "one look-alike was taken for the guest's VMCOREINFO";
    EXPECT_EQ(rd.nr_pages(), kPages - 0x20);  // all but the VGA hole (pfns 0xa0-0xbf, never probed)
}
}  // namespace
}  // namespace xendump::test::dump
