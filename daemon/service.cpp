#include "service.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cinttypes>
#include <cstring>
#include <functional>

#include "dump_dir.hpp"
#include "journal_log.hpp"
#include "retention.hpp"
#include "sd_notify.hpp"
#include "xendump/error.hpp"
#include "xendump/logdirty_records.hpp"

namespace xendump::daemon {

namespace {

// How long SIGTERM may take: running dumps are cancelled and must clean up
// (temporary removed, domain unpaused) within this; systemd's own
// TimeoutStopSec (90 s by default) stays well above it.
constexpr std::chrono::seconds kStopBound{20};
// A rescan even without watch events, in case an event was lost.
constexpr std::chrono::seconds kRescanInterval{10};
// A crash dump that failed for want of room is retried when there is room
// again, but after a failed retry not sooner than 1, 2, 4 ... 60 s later.
constexpr int64_t kMaxRetryDelay = 60;
// ... and at most this many times: a dump that keeps failing although the
// limits and the free space said it fits is not going to fit.
constexpr unsigned kMaxRoomAttempts = 16;
// While crashes wait, the room is looked at (a scan of the dump directory) this often.
constexpr std::chrono::seconds kRoomCheckInterval{1};

unsigned percent(uint64_t done, uint64_t total) {
    return total ? static_cast<unsigned>(done * 100 / total) : 0;
}

// How long the stop waits for an upload to finish its part.
constexpr std::chrono::seconds kUploadStopBound{10};

std::string local_host_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || !name[0]) return "localhost";
    return name;
}

int64_t retry_delay(unsigned attempts) {
    return std::min<int64_t>(int64_t{1} << std::min(attempts ? attempts - 1 : 0u, 6u), kMaxRetryDelay);
}

// A dump that a full filesystem stopped: refused before it started, or
// failed on ENOSPC/EDQUOT while writing.
bool for_want_of_room(const DumpJobResult& r) {
    if (r.result == DumpOutcome::refused) return true;
    if (r.result != DumpOutcome::failed) return false;
    return r.error.find(std::strerror(ENOSPC)) != std::string::npos ||
           r.error.find(std::strerror(EDQUOT)) != std::string::npos;
}

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string guest_key(const std::string& uuid, const std::string& name) {
    static const std::string nil = "00000000-0000-0000-0000-000000000000";
    return (!uuid.empty() && uuid != nil) ? uuid : "name:" + name;
}

UniqueFd block_signals_to_fd() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    // Blocked before any thread starts, so every thread inherits the mask and
    // the signals arrive only through the signalfd.
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
    UniqueFd fd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!fd) throw_errno("signalfd");
    return fd;
}

}  // namespace

Service::Service(const ServiceOptions& options) : options_(options) {}

Service::~Service() = default;

Config Service::config() const {
    std::lock_guard lock(mutex_);
    return config_;
}

void Service::setup() {
    Config cfg = load_config(options_.config_file);
    options_.overrides.apply(cfg);
    ensure_dump_dir(cfg.dump_dir, DumpDirOrigin::configured);  // its own, from DumpDir= or its --dump-dir
    for (const auto& name : clean_temporaries(cfg.dump_dir))
        log_message(LogLevel::notice, "removed leftover temporary " + (cfg.dump_dir / name).string());
    hv_ = open_hypervisor(cfg.host);
    // What a live dump killed before it could turn log-dirty off left on.
    for (const auto& line : release_stale_logdirty(*hv_, cfg.dump_dir)) log_message(LogLevel::warning, line);
    watch_ = hv_->watch_domains();
    crash_book_ = std::make_unique<CrashBook>(cfg.dump_dir / ".xen-dumpd-state.json");
    if (!crash_book_->load_warning().empty()) log_message(LogLevel::warning, crash_book_->load_warning());
    listener_ = std::make_unique<ControlListener>(cfg.control_socket, cfg.control_group);
    config_ = cfg;
    // Pending uploads are taken up whether or not [Upload] is set now: they
    // wait (listed by status) until it is.
    uploader_ = std::make_unique<Uploader>(cfg.dump_dir, local_host_name(), [this] { return config().upload; });
    uploader_->start();
    check_upload_sandbox(cfg);
    queue_ = std::make_unique<JobQueue>(
        cfg.max_parallel, [this](Job& job) { return run_job(job); }, [this](Job& job) { job_finished(job); });
    control_ = std::make_unique<ControlServer>(
        std::move(listener_), cfg.control_group,
        [this](JsonLineConnection& conn, const PeerCheck& peer, const nlohmann::json& request) {
            serve_request(conn, peer, request);
        });
    log_message(LogLevel::info, "watching " + hv_->describe() + " for crashed domains; dumps go to " +
                                    cfg.dump_dir.string() + ", control socket " + cfg.control_socket.string());
}

void Service::scan_for_crashes() {
    std::vector<DomainInfo> domains;
    std::vector<CrashKey> fresh;
    Config cfg;
    {
        std::lock_guard lock(mutex_);
        cfg = config_;
        try {
            domains = hv_->list_domains();
        } catch (const Error& e) {
            log_message(LogLevel::error, std::string("cannot list domains: ") + e.what());
            return;
        }
        fresh = crash_book_->observe(domains);
        crash_book_->flush();
    }
    for (const auto& key : fresh) {
        std::string name;
        {
            std::lock_guard lock(mutex_);
            try {
                name = hv_->domain_name(key.domid);
            } catch (const Error&) {
            }
        }
        std::string label = name.empty() ? "domain " + std::to_string(key.domid) : name;
        std::string guest = guest_key(key.uuid, name);
        LogFields fields{{"DOMID", std::to_string(key.domid)}, {"DOMAIN", name}, {"DOMAIN_UUID", key.uuid}};
        bool skip = false;
        unsigned skipped = 0;
        {
            std::lock_guard lock(mutex_);
            int64_t now = unix_now();
            skip = crash_book_->within_min_interval(guest, now, cfg.min_interval.count());
            if (skip) {
                skipped = crash_book_->skipped(guest);
                crash_book_->mark_handled(key);
            } else {
                crash_book_->record_dump_time(guest, now);
            }
        }
        if (skip) {
            fields.push_back({"SKIPPED_CRASHES", std::to_string(skipped)});
            log_message(LogLevel::warning,
                        "crash of " + label + " (domain " + std::to_string(key.domid) +
                            ") not dumped: last crash dump of this guest is less than MinInterval=" +
                            format_duration(cfg.min_interval) + " ago (" + std::to_string(skipped) + " skipped so far)",
                        fields);
            continue;
        }
        log_message(LogLevel::notice, "domain " + std::to_string(key.domid) + " (" + label + ") crashed; dumping",
                    fields);
        submit_crash(key, label, cfg);
    }
    note_state_file();
}

void Service::submit_crash(const CrashKey& key, const std::string& label, const Config& cfg) {
    DumpRequest req;
    req.domid = key.domid;
    req.reason = format::Reason::crash;
    req.digests = cfg.digests;
    req.threads = cfg.write_threads();
    queue_->submit(req, label, key);
}

void Service::note_state_file() {
    std::lock_guard lock(mutex_);
    const std::string& error = crash_book_->save_error();
    if (error == logged_state_error_) return;
    if (error.empty())
        log_message(LogLevel::notice, "the crash state file is written again");
    else
        log_message(LogLevel::error, "cannot save the crash state (kept in memory; a restart now may dump a "
                                     "handled crash again): " + error);
    logged_state_error_ = error;
}

void Service::retry_waiting_crashes() {
    std::vector<CrashKey> due;
    Config cfg;
    {
        std::lock_guard lock(mutex_);
        crash_book_->flush();
        due = crash_book_->due_retries(unix_now());
        cfg = config_;
    }
    auto now = std::chrono::steady_clock::now();
    if (due.empty() || now < next_room_check_) return;
    next_room_check_ = now + kRoomCheckInterval;
    // Room is judged as a dump's own start does it (limits and free space),
    // counting the retries started in this round.
    std::vector<StoredDump> stored;
    FilesystemSpace space;
    try {
        stored = to_stored(scan_dump_dir(cfg.dump_dir));
        space = filesystem_space(cfg.dump_dir);
    } catch (const std::exception&) {
        return;  // not even readable: try again later
    }
    uint64_t starting = 0;
    for (const auto& key : due) {
        std::optional<DomainInfo> info;
        uint64_t needed = 0;
        {
            std::lock_guard lock(mutex_);
            info = hv_->domain_info(key.domid);
            if (auto it = crash_book_->retries().find(key); it != crash_book_->retries().end())
                needed = it->second.room_needed;
        }
        // A domain gone meanwhile: the retry fails and records that. The
        // room waited for is what the dump occupies, not its guest's size:
        // its first step, or as much as it needed when it outgrew its room.
        uint64_t expected = info ? std::max(first_room(*info), needed) : 0;
        if (!decide_retention(stored, limits_of(cfg), space, unix_now(), starting + expected).fits)
            continue;  // still no room: no attempt, no record
        starting += expected;
        std::string name;
        unsigned attempt = 0;
        {
            std::lock_guard lock(mutex_);
            try {
                name = hv_->domain_name(key.domid);
            } catch (const Error&) {
            }
            crash_book_->take_retry(key);
            auto it = crash_book_->retries().find(key);
            if (it != crash_book_->retries().end()) attempt = it->second.attempts + 1;
        }
        std::string label = name.empty() ? "domain " + std::to_string(key.domid) : name;
        log_message(LogLevel::notice,
                    "there is room again: dumping the crash of " + label + " (domain " + std::to_string(key.domid) +
                        "), attempt " + std::to_string(attempt),
                    {{"DOMID", std::to_string(key.domid)}, {"DOMAIN", name}, {"DOMAIN_UUID", key.uuid}});
        submit_crash(key, label, cfg);
    }
    note_state_file();
}

DumpJobResult Service::run_job(Job& job) {
    Config cfg = config();
    auto hv = open_hypervisor(cfg.host);  // one per worker: backends need not be thread-safe
    DumpJobHooks hooks;
    hooks.dump.write.cancel = &job.cancel;
    hooks.on_start = [&](const std::filesystem::path& p) { queue_->set_path(job, p); };
    hooks.dump.write.on_progress = [&](const WriteProgress& p) {
        if (p.finding_pages) {
            job.pfns_total = p.pages_total;
            job.pfns_done = p.pages_done;
        }
        job.finding_pages = p.finding_pages;
        if (p.live_round) {  // the pass is done: its bytes stay
            job.dirty_pages = p.dirty_pages;
            job.live_final = p.live_final;
            job.live_round = p.live_round;
            return;
        }
        job.bytes_total = p.bytes_total;
        job.bytes_done = p.bytes_done;
    };
    hooks.dump.write.on_warning = [&](const std::string& w) {
        log_message(LogLevel::warning, "domain " + std::to_string(job.request.domid) + ": " + w,
                    {{"DOMID", std::to_string(job.request.domid)}});
    };
    // Mode=stream: straight into the store, else (it failed) into the dump directory for the uploader.
    if (cfg.upload.enabled() && cfg.upload.mode == UploadMode::stream)
        hooks.stream = DumpJobHooks::Stream{cfg.upload, local_host_name()};
    DumpJobResult result = run_dump_job(*hv, cfg, job.request, hooks);
    // Published: copied to object storage from here on ([Upload], uploader.hpp).
    if (result.result == DumpOutcome::ok && !result.streamed && cfg.upload.enabled()) {
        try {
            uploader_->add(result.path, result.stream_error);
        } catch (const std::exception& e) {
            log_message(LogLevel::error,
                        "cannot record the upload of " + result.path.string() + " (the dump stays local): " + e.what(),
                        {{"DUMP_PATH", result.path.string()}});
        }
    }
    if (job.crash && result.result == DumpOutcome::ok && cfg.on_crash == OnCrash::destroy) {
        try {
            hv->destroy(job.request.domid);
            log_message(LogLevel::notice, "destroyed domain " + std::to_string(job.request.domid) + " (OnCrash=destroy)",
                        {{"DOMID", std::to_string(job.request.domid)}});
        } catch (const Error& e) {
            log_message(LogLevel::error, std::string("OnCrash=destroy failed: ") + e.what(),
                        {{"DOMID", std::to_string(job.request.domid)}});
        }
    }
    return result;
}

void Service::job_finished(Job& job) {
    if (!job.crash) return;
    std::lock_guard lock(mutex_);
    // A dump abandoned because the service stops is not done: after a
    // restart the crash is dumped again. One stopped by a full filesystem
    // waits for room. Anything else is final.
    bool room = job.result && for_want_of_room(*job.result);
    bool abandoned = stopping_ && job.result && (job.result->result == DumpOutcome::cancelled || room);
    if (abandoned) {
        crash_book_->mark_abandoned(*job.crash);
        return;
    }
    auto it = crash_book_->retries().find(*job.crash);
    unsigned attempts = (it == crash_book_->retries().end() ? 0 : it->second.attempts) + 1;
    std::string what = "crash dump of " + job.domain_label + " (domain " + std::to_string(job.request.domid) + ")";
    LogFields fields{{"DOMID", std::to_string(job.request.domid)}, {"DOMAIN_UUID", job.crash->uuid}};
    if (room && attempts < kMaxRoomAttempts) {
        crash_book_->mark_waiting(*job.crash, job.result->error, unix_now() + retry_delay(attempts),
                                  job.result->room_needed);
        log_message(LogLevel::warning,
                    what + " " + to_string(job.result->result) + " for want of room: " + job.result->error +
                        "; it is retried when there is room (attempt " + std::to_string(attempts) + ")",
                    fields);
        return;
    }
    if (room)
        log_message(LogLevel::error,
                    what + ": giving up after " + std::to_string(attempts) + " attempts: " + job.result->error, fields);
    crash_book_->mark_handled(*job.crash);
}

// The unit allows AF_UNIX sockets only, unless the upload drop-in widens
// it (xen-dumpd.conf(5)): say so at once rather than at every attempt.
void Service::check_upload_sandbox(const Config& cfg) {
    if (!cfg.upload.enabled()) return;
    if (!network_sockets_allowed())
        log_message(LogLevel::error, std::string("[Upload] Target= is set, but the service may not open network "
                                                 "sockets (RestrictAddressFamilies=AF_UNIX), so dumps stay local: ") +
                                         kUploadSandboxHint);
}

void Service::reload() {
    try {
        Config cfg = load_config(options_.config_file);
        options_.overrides.apply(cfg);
        std::lock_guard lock(mutex_);
        if (cfg.host != config_.host || cfg.control_socket != config_.control_socket ||
            cfg.control_group != config_.control_group || cfg.dump_dir != config_.dump_dir)
            log_message(LogLevel::notice,
                        "Host=, ControlSocket=, ControlGroup= and DumpDir= take effect at the next restart");
        cfg.host = config_.host;
        cfg.control_socket = config_.control_socket;
        cfg.control_group = config_.control_group;
        cfg.dump_dir = config_.dump_dir;
        config_ = cfg;
        queue_->set_max_parallel(cfg.max_parallel);
        log_message(LogLevel::notice, "configuration reloaded");
        check_upload_sandbox(cfg);
        uploader_->wake();  // waiting uploads try again at once, with the new [Upload]
    } catch (const Error& e) {
        log_message(LogLevel::error, std::string("keeping the old configuration: ") + e.what());
    }
}

void Service::update_status() {
    std::string status;
    auto jobs = queue_->snapshot();
    unsigned queued = 0;
    for (const auto& j : jobs) {
        if (j.state == JobState::queued) {
            ++queued;
            continue;
        }
        if (!status.empty()) status += ", ";
        status += "Dumping " + j.domain + " (domain " + std::to_string(j.domid) + "): ";
        if (j.finding_pages)
            status += "finding pages, " + std::to_string(percent(j.pfns_done, j.pfns_total)) + "%";
        else
            status += std::to_string(percent(j.bytes_done, j.bytes_total)) + "%";
    }
    if (queued) status += (status.empty() ? "" : "; ") + std::to_string(queued) + " queued";
    unsigned waiting_uploads = 0;
    for (const auto& u : uploader_->snapshot()) {
        if (!u.active) {
            ++waiting_uploads;
            continue;
        }
        status += (status.empty() ? "" : "; ") + std::string("Uploading ") +
                  std::filesystem::path(u.dump).filename().string() + ": " +
                  std::to_string(percent(u.bytes_done, u.bytes_total)) + "%";
    }
    if (waiting_uploads)
        status += (status.empty() ? "" : "; ") + std::to_string(waiting_uploads) + " upload" +
                  (waiting_uploads == 1 ? "" : "s") + " waiting";
    if (status.empty()) status = "Waiting for crashes and requests";
    if (status != last_status_) {
        notify_status(status);
        last_status_ = status;
    }
}

int Service::run() {
    UniqueFd sigfd = block_signals_to_fd();
    try {
        setup();
    } catch (const std::exception& e) {
        log_message(LogLevel::error, std::string("cannot start: ") + e.what());
        notify_stopping();
        return 1;
    }
    try {
        scan_for_crashes();
    } catch (const std::exception& e) {
        log_message(LogLevel::error, std::string("crash scan: ") + e.what());
    }
    notify_ready();
    last_status_ = "Waiting for crashes and requests";
    auto watchdog = watchdog_interval();
    auto next_ping = std::chrono::steady_clock::now();
    auto next_rescan = std::chrono::steady_clock::now() + kRescanInterval;
    int exit_code = 0;
    while (!stopping_) {
        pollfd fds[2] = {{sigfd.get(), POLLIN, 0}, {watch_->fd(), POLLIN, 0}};
        int timeout_ms = 500;
        if (watchdog) timeout_ms = static_cast<int>(std::min<int64_t>(timeout_ms, watchdog->count()));
        int r = ::poll(fds, 2, timeout_ms);
        if (r < 0 && errno != EINTR) {
            log_message(LogLevel::error, std::string("poll failed: ") + std::strerror(errno));
            exit_code = 1;
            break;
        }
        auto now = std::chrono::steady_clock::now();
        if (watchdog && now >= next_ping) {
            notify_watchdog();
            next_ping = now + *watchdog;
        }
        // Whatever fails in one round (a full disk, a vanished domain, no
        // memory for a thread) is logged; the next round tries again.
        auto guarded = [](const char* what, const std::function<void()>& step) {
            try {
                step();
            } catch (const std::exception& e) {
                log_message(LogLevel::error, std::string(what) + ": " + e.what());
            }
        };
        if (r > 0 && (fds[0].revents & POLLIN)) {
            signalfd_siginfo si{};
            while (::read(sigfd.get(), &si, sizeof si) == sizeof si) {
                if (si.ssi_signo == SIGHUP) {
                    guarded("reload", [&] { reload(); });
                } else {
                    log_message(LogLevel::notice, std::string("stopping on ") + strsignal(static_cast<int>(si.ssi_signo)));
                    stopping_ = true;
                }
            }
        }
        if (stopping_) break;
        bool rescan = now >= next_rescan;
        if (r > 0 && (fds[1].revents & POLLIN)) {
            guarded("crash watch", [&] {
                std::lock_guard lock(mutex_);
                rescan = watch_->consume() || rescan;
            });
        }
        if (rescan) {
            guarded("crash scan", [&] { scan_for_crashes(); });
            next_rescan = now + kRescanInterval;
        }
        guarded("crash retry", [&] { retry_waiting_crashes(); });
        guarded("dump workers", [&] { queue_->grow_workers(); });
        guarded("status", [&] { update_status(); });
    }

    notify_stopping();
    control_->close_listener();  // no new requests
    if (!queue_->stop(kStopBound)) {
        log_message(LogLevel::error, "a dump did not stop within " + std::to_string(kStopBound.count()) +
                                         " s; exiting anyway");
        ::_exit(1);
    }
    // An upload stops after its part; its state is on disk, and the next
    // start takes it up. One hanging on the network is not waited for.
    if (!uploader_->stop(kUploadStopBound)) {
        log_message(LogLevel::notice, "an upload is still waiting for the network; it goes on at the next start");
        control_->stop();
        ::_exit(exit_code);
    }
    control_->stop();
    return exit_code;
}

int run_service(const ServiceOptions& options) {
    Service service(options);
    return service.run();
}

}  // namespace xendump::daemon
