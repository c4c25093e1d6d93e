#include "one_shot.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli.hpp"
#include "control_protocol.hpp"
#include "dump_dir.hpp"
#include "dump_job.hpp"
#include "journal_log.hpp"
#include "level_estimate.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/s3.hpp"

namespace xendump::daemon {

namespace {

std::atomic<bool> g_cancel{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void on_stop_signal(int) { g_cancel = true; }

// Every way the command can be told to stop, short of SIGKILL, cancels the
// dump, which then unwinds through PausedDomain: the guest is never left
// paused. SIGHUP (the terminal or ssh session went away) and SIGQUIT too.
// SIGPIPE is ignored, so a reader that went away (`-o - | head`, a dropped
// `| ssh`) makes the write fail with EPIPE, an Error like any other. No
// SA_RESTART: a write blocked on a stalled pipe returns, and the writer
// sees the flag (io::Sink::cancel_on).
void install_cancel_handlers() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
}

// How often a one-shot waiting on the service looks at the cancel flag.
constexpr std::chrono::milliseconds kCancelPoll{100};

void say(const std::string& line) { std::cerr << "xen-dumpd: " << line << "\n"; }

// A consistent live dump's figures, on stderr (with -q: nothing).
void say_precopy(uint64_t pause_usec, unsigned rounds, uint64_t recopied, bool left_paused) {
    say("live dump: paused " + std::to_string(pause_usec) + " us after " + std::to_string(rounds) + " round(s), " +
        std::to_string(recopied) + " page(s) copied again" + (left_paused ? "; the guest is left paused" : ""));
}

enum class ViaService { done, not_running };

// Returns not_running when the command should dump by itself.
ViaService ask_service(const OneShotOptions& o, const Config& cfg, int& exit_code) {
    std::optional<JsonLineConnection> conn;
    try {
        conn = connect_control(cfg.control_socket);
    } catch (const Error& e) {
        return ViaService::not_running;  // e.g. EACCES on the socket: try by ourselves
    }
    if (!conn) return ViaService::not_running;
    nlohmann::json request = {{"command", "dump"}, {"domain", o.domain}, {"live", o.live}, {"digests", o.digests}};
    if (o.overrides.host) request["host"] = *o.overrides.host;
    if (o.overrides.dump_dir) request["dump_dir"] = std::filesystem::absolute(*o.overrides.dump_dir).string();
    if (o.overrides.threads) request["threads"] = *o.overrides.threads;
    if (o.format) request.update(dump_format_json(*o.format));
    if (o.recipients) request["recipients"] = *o.recipients;
    if (o.precopy.on) request["precopy"] = precopy_json(o.precopy);
    if (o.paused) request["paused"] = true;
    cli::ProgressBar bar("dumping " + o.domain, !o.quiet);
    std::optional<uint64_t> job;
    try {
        conn->send(request);
        for (;;) {
            auto m = conn->receive(kCancelPoll);
            if (g_cancel) {
                // SIGTERM/Ctrl-C while the service queues or runs our dump:
                // cancel it (the service also cancels when we hang up) and go.
                bar.finish();
                if (job) {
                    try {
                        control_request(cfg.control_socket, {{"command", "cancel"}, {"id", *job}},
                                        std::chrono::seconds(1));
                    } catch (const Error&) {
                        // Hanging up below cancels it too.
                    }
                }
                conn.reset();
                say("cancelled");
                exit_code = cli::kExitFailure;
                return ViaService::done;
            }
            if (!m) continue;
            std::string event = m->value("event", "");
            if (event == "error") {
                if (m->value("kind", "") == "mismatch") return ViaService::not_running;
                bar.finish();
                say(m->value("message", "refused by the service"));
                exit_code = cli::kExitFailure;
                return ViaService::done;
            }
            if (event == "queued") job = m->value("id", uint64_t{0});
            if (event == "queued" && !o.quiet && isatty(STDERR_FILENO))
                say("queued by the service as job " + std::to_string(m->value("id", 0)));
            if (event == "progress" && m->value("finding_pages", false))
                bar.finding_pages(m->value("pfns_done", uint64_t{0}), m->value("pfns_total", uint64_t{0}));
            else if (event == "progress" && m->contains("live_round"))
                bar.live_round(m->value("live_round", 0u), m->value("dirty_pages", uint64_t{0}),
                               m->value("live_final", false));
            else if (event == "progress")
                bar.update(m->value("bytes_done", uint64_t{0}), m->value("bytes_total", uint64_t{0}));
            if (event == "finished") {
                bar.finish();
                if (!o.quiet && m->contains("warnings") && (*m)["warnings"].is_array())
                    for (const auto& w : (*m)["warnings"])
                        if (w.is_string()) say("warning: " + w.get<std::string>());
                if (m->value("result", "") == "ok") {
                    std::cout << m->value("path", "") << std::endl;
                    exit_code = cli::kExitOk;
                } else {
                    say("dump " + m->value("result", std::string("failed")) + ": " + m->value("error", ""));
                    exit_code = cli::kExitFailure;
                }
                return ViaService::done;
            }
        }
    } catch (const Error& e) {
        bar.finish();
        say(std::string("lost the service: ") + e.what());
        exit_code = cli::kExitFailure;
        return ViaService::done;
    }
}

// --estimate: the guest paused (unless --live) while its pages are
// classified, as for a dump; nothing written.
int estimate(const OneShotOptions& o, const Config& cfg) {
    try {
        auto hv = open_hypervisor(cfg.host);
        const uint32_t domid = resolve_domain(*hv, o.domain);
        DumpOptions opts;
        opts.live = o.live || o.precopy.on;  // nothing to keep consistent: not paused
        opts.dump_level = o.estimate_level;
        opts.write.cancel = &g_cancel;
        opts.write.on_warning = [&](const std::string& w) {
            if (!o.quiet) say("warning: " + w);
        };
        std::string name = hv->domain_name(domid);
        if (name.empty()) name = "domain" + std::to_string(domid);
        const auto start = std::chrono::steady_clock::now();
        const kernel::DumpLevelEstimate e = estimate_domain_levels(*hv, domid, opts);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        cli::print_level_estimate(e, "domain " + name + " (" + std::to_string(domid) + ")", o.json, seconds);
        return cli::kExitOk;
    } catch (const Error& e) {
        say(g_cancel ? std::string("cancelled") : std::string(e.what()));
        return cli::kExitFailure;
    }
}

}  // namespace

int run_one_shot(const OneShotOptions& o) {
    log_set_enabled(false);
    Config cfg = Config::defaults();
    try {
        cfg = load_config(o.config_file);
    } catch (const Error& e) {
        say(e.what());  // a dump must not go where a broken or missing configuration did not say
        return cli::kExitFailure;
    }
    o.overrides.apply(cfg);
    install_cancel_handlers();

    if (o.estimate) return estimate(o, cfg);
    if (!o.output) {
        int code = 0;
        if (ask_service(o, cfg, code) == ViaService::done) return code;
    }
    try {
        auto hv = open_hypervisor(cfg.host);
        uint32_t domid = resolve_domain(*hv, o.domain);
        cli::ProgressBar bar("dumping " + o.domain, !o.quiet && o.output != std::string("-"));
        DumpOptions opts;
        opts.live = o.live;
        opts.precopy = o.precopy;
        opts.precopy.records = logdirty_records_dir(cfg);
        const DumpFormat how = o.format.value_or(DumpFormat{});  // -o: the command line's only
        opts.kdump = how.kdump;
        opts.compression = how.compression;
        opts.dump_level = how.dump_level;
        opts.flattened = o.flattened;
        opts.reason = format::Reason::request;
        opts.write.digests = o.digests;
        opts.write.threads = cfg.write_threads();
        opts.write.cancel = &g_cancel;
        opts.write.on_progress = [&](const WriteProgress& p) {
            if (p.finding_pages)
                bar.finding_pages(p.pages_done, p.pages_total);
            else if (p.live_round)
                bar.live_round(p.live_round, p.dirty_pages, p.live_final);
            else
                bar.update(p.bytes_done, p.bytes_total);
        };
        opts.write.on_warning = [&](const std::string& w) {
            if (!o.quiet) say("warning: " + w);
        };
        // -o too: the configured recipients when -r/-R name none.
        opts.write.recipients = o.recipients ? *o.recipients : cfg.recipients_for(hv->domain_name(domid));
        if (o.output == std::string("-")) {
            if (isatty(STDOUT_FILENO)) {
                say("refusing to write a dump to a terminal; redirect standard output");
                return cli::kExitUsage;
            }
            dump_domain_to_fd(*hv, domid, STDOUT_FILENO, false, opts);
            return cli::kExitOk;
        }
        if (o.output && s3::is_url(*o.output)) {
            // Object storage: the credentials, endpoint and region as the
            // AWS tools take them (xendump/s3.hpp), never from argv.
            const s3::Url url = s3::parse_url(*o.output);
            s3::Client client(s3::settings_from_environment());
            DumpResult r = dump_domain_to_object(*hv, domid, client, url, opts);
            bar.finish();
            if (!r.unreadable_pfns.empty())
                say(std::to_string(r.unreadable_pfns.size()) + " pages could not be read (listed in NT_XEN_UNREADABLE)");
            std::cout << url.str() << std::endl;
            return cli::kExitOk;
        }
        if (o.output) {
            DumpResult r = dump_domain_to_file(*hv, domid, *o.output, opts);
            bar.finish();
            if (r.live && !o.quiet)
                say_precopy(r.live->pause_usec, r.live->rounds, r.live->pages_recopied, r.live->left_paused);
            if (!r.unreadable_pfns.empty())
                say(std::to_string(r.unreadable_pfns.size()) + " pages could not be read (listed in NT_XEN_UNREADABLE)");
            std::cout << r.path.string() << std::endl;
            return cli::kExitOk;
        }
        DumpRequest req;
        req.domid = domid;
        req.live = o.live;
        req.precopy = o.precopy;
        req.live_asked = o.live || o.precopy.on || o.paused;
        req.digests = o.digests;
        req.file_format = o.format;
        req.recipients = o.recipients;
        req.threads = cfg.write_threads();
        DumpJobHooks hooks;
        hooks.dump = opts;
        DumpJobResult r = run_dump_job(*hv, cfg, req, hooks);
        bar.finish();
        if (r.result != DumpOutcome::ok) {
            say("dump " + to_string(r.result) + ": " + r.error);
            return cli::kExitFailure;
        }
        if (r.info.pause_usec && !o.quiet)
            say_precopy(*r.info.pause_usec, r.info.live_rounds.value_or(0), r.info.pages_recopied.value_or(0),
                        o.precopy.leave_paused);
        std::cout << r.path.string() << std::endl;
        return cli::kExitOk;
    } catch (const Error& e) {
        say(g_cancel ? std::string("cancelled") : std::string(e.what()));
        return cli::kExitFailure;
    }
}

}  // namespace xendump::daemon
