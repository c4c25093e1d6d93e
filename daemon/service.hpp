// The service: `xen-dumpd` without --domain, in the foreground for systemd
// (Type=notify). One thread polls the crash watch and a signalfd; dumps run
// in the job queue's workers; the control socket has its own threads
// (ControlServer), so that no client can delay a crash dump. An error in
// any of them is logged and survived.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "config.hpp"
#include "control_protocol.hpp"
#include "control_server.hpp"
#include "crash_book.hpp"
#include "job_queue.hpp"
#include "uploader.hpp"
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
    void retry_waiting_crashes();
    void submit_crash(const CrashKey& key, const std::string& label, const Config& cfg);
    void note_state_file();
    void reload();
    void update_status();
    void serve_request(JsonLineConnection& conn, const PeerCheck& peer, const nlohmann::json& request);
    void handle_dump_request(JsonLineConnection& conn, const nlohmann::json& request);
    void follow_dump_job(JsonLineConnection& conn, const std::shared_ptr<Job>& job);
    nlohmann::json status_json();
    DumpJobResult run_job(Job& job);
    void job_finished(Job& job);
    void check_upload_sandbox(const Config& cfg);
    Config config() const;

    ServiceOptions options_;
    mutable std::mutex mutex_;  // config_, crash_book_, hv_
    Config config_;
    std::unique_ptr<Hypervisor> hv_;
    std::unique_ptr<DomainWatch> watch_;
    std::unique_ptr<CrashBook> crash_book_;
    std::string logged_state_error_;  // the state file error last logged (guarded by mutex_)
    std::unique_ptr<ControlListener> listener_;  // until control_ takes it
    std::unique_ptr<JobQueue> queue_;
    std::unique_ptr<ControlServer> control_;
    std::unique_ptr<Uploader> uploader_;  // [Upload]: the dumps published, copied to object storage
    std::atomic<bool> stopping_{false};
    std::string last_status_;
    std::chrono::steady_clock::time_point next_room_check_{};  // main thread only
};

}  // namespace xendump::daemon
