// The service: `xen-dumpd` without --domain, in the foreground for systemd
// (Type=notify). One thread polls the crash watch, the control socket and a
// signalfd; dumps run in the job queue's workers; each control connection
// has its own thread.
#pragma once

#include <atomic>
#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "config.hpp"
#include "control_protocol.hpp"
#include "control_server.hpp"
#include "crash_book.hpp"
#include "job_queue.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump::daemon {

struct ServiceOptions {
    std::filesystem::path config_file;  // default /etc/xen-dumpd.conf
    ConfigOverrides overrides;
};

// Runs until SIGTERM/SIGINT; returns the exit code. Sends STOPPING=1 on every exit.
int run_service(const ServiceOptions& options);

class Service {
public:
    explicit Service(const ServiceOptions& options);
    ~Service();
    int run();

private:
    void setup();
    void scan_for_crashes();
    void reload();
    void update_status();
    void accept_connections();
    void serve_connection(JsonLineConnection conn);
    void handle_dump_request(JsonLineConnection& conn, const nlohmann::json& request);
    nlohmann::json status_json();
    DumpJobResult run_job(Job& job);
    void job_finished(Job& job);
    Config config() const;

    ServiceOptions options_;
    mutable std::mutex mutex_;  // config_, crash_book_, hv_
    Config config_;
    std::unique_ptr<Hypervisor> hv_;
    std::unique_ptr<DomainWatch> watch_;
    std::unique_ptr<CrashBook> crash_book_;
    std::unique_ptr<ControlListener> listener_;
    std::unique_ptr<JobQueue> queue_;
    std::atomic<bool> stopping_{false};
    std::mutex connections_mutex_;
    struct Connection {
        std::thread thread;
        UniqueFd fd;  // shutdown() on stop wakes the thread (which holds a dup)
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::list<Connection> connections_;
    std::string last_status_;
};

}  // namespace xendump::daemon
