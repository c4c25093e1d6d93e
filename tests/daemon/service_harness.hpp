// Runs xen-dumpd as a real process against a simulated host, with
// NOTIFY_SOCKET pointed at a datagram socket the test reads.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace xendump::test {

struct SimDomainSpec {
    uint32_t domid;
    std::string name;
    std::string uuid;
    uint64_t pages = 256;
    uint64_t per_page_ns = 0;  // map_cost: slows dumps down
};

// xen-dump-sim create DIR SPEC.json; throws on failure.
void create_sim_host(const std::filesystem::path& dir, const std::vector<SimDomainSpec>& domains);
void sim(const std::vector<std::string>& args);  // xen-dump-sim ARGS..., must succeed
std::string sim_state(const std::filesystem::path& host, uint32_t domid);  // "running", "crashed", ...

bool wait_until(const std::function<bool()>& pred, std::chrono::seconds timeout = std::chrono::seconds(20));

std::vector<std::filesystem::path> dumps_in(const std::filesystem::path& dir);     // *.core
std::vector<std::filesystem::path> sidecars_in(const std::filesystem::path& dir);  // *.core.json
std::vector<std::filesystem::path> temporaries_in(const std::filesystem::path& dir);

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
    std::string log() const;                    // stderr so far
    const std::filesystem::path& socket() const { return socket_; }
    const std::filesystem::path& config_file() const { return config_; }
    std::vector<std::string> common_args() const;  // --config, --socket, --dump-dir, --host

private:
    std::filesystem::path work_, host_, dump_dir_, socket_, notify_, log_, config_;
    int notify_fd_ = -1;
    pid_t pid_ = -1;
    std::vector<std::string> received_;
};

}  // namespace xendump::test
