// Runs xen-dumpd as a real process against a simulated host, with
// NOTIFY_SOCKET pointed at a datagram socket the test reads.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "control_protocol.hpp"
#include "test_support.hpp"

namespace xendump::test {

struct SimDomainSpec {
    uint32_t domid;
    std::string name;
    std::string uuid;
    uint64_t pages = 256;
    uint64_t per_page_ns = 0;  // map_cost: slows dumps down
    std::vector<std::pair<uint64_t, uint64_t>> zero_ranges = {};  // [pfn, count] of all-zero pages
    std::string type = "pv";   // or "hvm", "pvh": one extent of `pages` gfns from 0
    uint64_t per_call_us = 0;  // map_cost: each mapping or page-type call (man xen-dump-sim)
    uint64_t writer_rate = 0;  // a writer dirtying pages from pfn 16 on while it is mapped (man xen-dump-sim)
};

// xen-dump-sim create DIR SPEC.json; throws on failure.
void create_sim_host(const std::filesystem::path& dir, const std::vector<SimDomainSpec>& domains);
void sim(const std::vector<std::string>& args);  // xen-dump-sim ARGS..., must succeed
std::string sim_state(const std::filesystem::path& host, uint32_t domid);  // "running", "crashed", ...

bool wait_until(const std::function<bool()>& pred, std::chrono::seconds timeout = std::chrono::seconds(20));

// A small tmpfs mounted at `dir` (created) for the life of the object, to
// fill a dump filesystem for real; mounted() is false where mounting is not
// allowed (not root).
class SmallFilesystem {
public:
    SmallFilesystem(const std::filesystem::path& dir, const std::string& size);
    ~SmallFilesystem();
    bool mounted() const { return mounted_; }
    // Fills it up to the last block with one file; empty() removes it.
    void fill();
    void empty();

private:
    std::filesystem::path dir_;
    bool mounted_ = false;
};

// A control client that connects and sends nothing (or what it is told).
// Non-blocking connect: false when the service's backlog is full.
class RawClient {
public:
    explicit RawClient(const std::filesystem::path& socket);
    bool connected() const { return conn_.has_value(); }
    void send(const std::string& text);
    // The next line, waiting up to `timeout`; empty when none came.
    std::string read_line(std::chrono::milliseconds timeout);

private:
    std::optional<xendump::daemon::JsonLineConnection> conn_;
};

// Up to `count` clients that connect and say nothing: as many as get in
// within a second (the rest find the service's backlog full).
std::vector<RawClient> idle_clients(const std::filesystem::path& socket, size_t count);

// How often `what` occurs in `text`.
size_t count_of(const std::string& text, const std::string& what);

std::vector<std::filesystem::path> dumps_in(const std::filesystem::path& dir);     // *.core
std::vector<std::filesystem::path> sidecars_in(const std::filesystem::path& dir);  // *.core.json, *.core.age.json
std::vector<std::filesystem::path> temporaries_in(const std::filesystem::path& dir);

// A pids cgroup with pids.max = `limit` (systemd's TasksMax=), where the
// kernel offers one to root (cgroup v1 "pids" hierarchy, or a v2 root with
// the pids controller); ok() is false elsewhere.
class TaskLimit {
public:
    explicit TaskLimit(unsigned limit);
    ~TaskLimit();  // removes the cgroup once its processes are gone
    bool ok() const { return !dir_.empty(); }
    void enter() const;  // moves the calling process in (async-signal-safe enough for a forked child)

private:
    std::filesystem::path dir_;
    std::string procs_;  // dir_/cgroup.procs, prepared for the child
};

class ServiceProcess {
public:
    // `work` holds the socket, notify socket and log; `config_text` (may be empty) becomes the config file.
    ServiceProcess(const std::filesystem::path& work, const std::filesystem::path& host,
                   const std::filesystem::path& dump_dir, const std::string& config_text = {});
    ~ServiceProcess();  // SIGKILL if still running

    void start();
    bool wait_ready(std::chrono::seconds timeout = std::chrono::seconds(20));
    int stop(int signal = 15);  // returns the exit status (or -signal)
    void kill_hard();           // SIGKILL, reaped
    void signal(int sig);
    std::vector<std::string> notifications();  // all received so far
    // Reads the notify socket in a thread of its own from now on, as
    // systemd would: a long test that does not read would fill the socket
    // and block the service in sd_notify().
    void keep_reading_notifications();
    std::string log() const;                    // stderr so far
    // Whether log() holds `text` within `timeout` (the service logs some
    // lines after what a test waits for: a dump's record, an upload's state).
    bool logged(const std::string& text, std::chrono::seconds timeout = std::chrono::seconds(20)) const;
    const std::filesystem::path& socket() const { return socket_; }
    const std::filesystem::path& config_file() const { return config_; }
    const std::filesystem::path& dump_dir() const { return dump_dir_; }
    std::vector<std::string> common_args() const;  // --config, --socket, --dump-dir, --host
    void set_args(std::vector<std::string> args) { args_ = std::move(args); }  // instead of common_args()
    void set_nofile_limit(unsigned long limit) { nofile_ = limit; }  // RLIMIT_NOFILE of the next start()
    void set_task_limit(const TaskLimit* limit) { tasks_ = limit; }     // the next start() runs in it
    pid_t pid() const { return pid_; }
    bool running();  // not exited yet (reaps it when it has)
    int exit_status() const { return exit_status_; }  // once !running()

    // From /proc: threads, open descriptors, CPU time (user + system).
    unsigned threads() const;
    unsigned open_fds() const;
    std::chrono::milliseconds cpu_time() const;

private:
    std::filesystem::path work_, host_, dump_dir_, socket_, notify_, log_, config_;
    int notify_fd_ = -1;
    pid_t pid_ = -1;
    int exit_status_ = 0;
    unsigned long nofile_ = 0;
    const TaskLimit* tasks_ = nullptr;
    std::optional<std::vector<std::string>> args_;
    std::vector<std::string> received_;
    std::mutex received_mutex_;
    std::thread reader_;
    std::atomic<bool> reader_stop_{false};
};

// xen-dumpctl ARGS with the --config, --dump-dir and --socket of `service`.
RunResult run_ctl(const ServiceProcess& service, std::vector<std::string> args);

}  // namespace xendump::test
