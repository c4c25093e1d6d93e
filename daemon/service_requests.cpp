// The service's answers on the control socket (protocol in control_protocol.hpp).
#include <unistd.h>

#include "dump_job.hpp"
#include "journal_log.hpp"
#include "service.hpp"
#include "xendump/error.hpp"
#include "xendump/writer.hpp"

namespace xendump::daemon {

namespace {

// A live dump's pre-copy round, in a job's status and its progress events.
void add_live_round(nlohmann::json& out, unsigned round, uint64_t dirty, bool final) {
    if (!round) return;
    out["live_round"] = round;
    out["dirty_pages"] = dirty;
    out["live_final"] = final;
}

nlohmann::json job_json(const JobSnapshot& j) {
    nlohmann::json out = {{"id", j.id},
                          {"state", to_string(j.state)},
                          {"domid", j.domid},
                          {"domain", j.domain},
                          {"reason", j.reason},
                          {"bytes_done", j.bytes_done},
                          {"bytes_total", j.bytes_total},
                          {"path", j.path}};
    if (j.finding_pages) {
        out["finding_pages"] = true;
        out["pfns_done"] = j.pfns_done;
        out["pfns_total"] = j.pfns_total;
    }
    add_live_round(out, j.live_round, j.dirty_pages, j.live_final);
    return out;
}

}  // namespace

nlohmann::json Service::status_json() {
    Config cfg = config();
    nlohmann::json jobs = nlohmann::json::array();
    for (const auto& j : queue_->snapshot()) jobs.push_back(job_json(j));
    nlohmann::json waiting = nlohmann::json::array();
    std::string state_error;
    {
        std::lock_guard lock(mutex_);
        for (const auto& [key, r] : crash_book_->retries())
            waiting.push_back({{"domid", key.domid},
                               {"uuid", key.uuid},
                               {"error", r.error},
                               {"attempts", r.attempts},
                               {"retrying", !r.waiting}});
        state_error = crash_book_->save_error();
    }
    nlohmann::json uploads = nlohmann::json::array();
    for (const auto& u : uploader_->snapshot()) {
        nlohmann::json j = {{"dump", u.dump},
                            {"target", u.target},
                            {"state", u.active ? "uploading" : "waiting"},
                            {"bytes_done", u.bytes_done},
                            {"bytes_total", u.bytes_total},
                            {"attempts", u.attempts},
                            {"error", u.reason}};
        if (u.next_attempt) j["next_attempt"] = u.next_attempt;
        uploads.push_back(std::move(j));
    }
    nlohmann::json status = {{"event", "status"},
                             {"host", hv_->describe()},
                             {"dump_dir", cfg.dump_dir.string()},
                             {"max_parallel", cfg.max_parallel},
                             {"jobs", jobs},
                             {"crashes_waiting_for_room", waiting},
                             {"uploads", uploads}};
    if (cfg.upload.enabled()) status["upload_target"] = cfg.upload.target();
    if (!state_error.empty()) status["state_file_error"] = state_error;
    return status;
}

void Service::serve_request(JsonLineConnection& conn, const PeerCheck& peer, const nlohmann::json& request) {
    // Called by the ControlServer once the peer is allowed and its request
    // line parsed; a field of the wrong type throws a json exception, which
    // the server answers with an error reply.
    if (!request.contains("command") || !request["command"].is_string()) {
        conn.send(control_error("request", "the request has no \"command\" string"));
        return;
    }
    std::string command = request["command"];
    if (command == "dump") {
        handle_dump_request(conn, request);
    } else if (command == "status") {
        conn.send(status_json());
    } else if (command == "cancel") {
        uint64_t id = request.value("id", uint64_t{0});
        if (queue_->cancel(id)) {
            log_message(LogLevel::notice, "job " + std::to_string(id) + " cancelled by uid " + std::to_string(peer.uid));
            conn.send({{"event", "cancelled"}, {"id", id}});
        } else {
            conn.send(control_error("request", "no queued or running job " + std::to_string(id)));
        }
    } else {
        conn.send(control_error("request", "unknown command \"" + command + "\""));
    }
}

void Service::handle_dump_request(JsonLineConnection& conn, const nlohmann::json& request) {
    Config cfg = config();
    // A client that names another host or dump directory than ours must not
    // silently get our dump: it dumps by itself instead.
    if (request.contains("host") && request["host"].is_string()) {
        std::string host = request["host"];
        if (!host.empty() && host != cfg.host && !(cfg.host.empty() && host == hv_->describe())) {
            conn.send(control_error("mismatch", "the service dumps from " + hv_->describe() + ", not " + host));
            return;
        }
    }
    if (request.contains("dump_dir") && request["dump_dir"].is_string() &&
        std::filesystem::path(request["dump_dir"].get<std::string>()) != cfg.dump_dir) {
        conn.send(control_error("mismatch", "the service writes to " + cfg.dump_dir.string()));
        return;
    }
    DumpRequest req;
    req.reason = format::Reason::request;
    req.live = request.value("live", false);
    req.digests = request.value("digests", cfg.digests);
    req.threads = cfg.write_threads();
    if (request.contains("threads")) {
        const auto& t = request["threads"];
        if (!t.is_number_unsigned() || t.get<uint64_t>() == 0 || t.get<uint64_t>() > kMaxWriteThreads) {
            conn.send(control_error("request", "threads must be a number from 1 to " + std::to_string(kMaxWriteThreads)));
            return;
        }
        req.threads = t.get<unsigned>();
    }
    if (request.contains("format")) {
        try {
            req.file_format = dump_format_of_request(request);
        } catch (const Error& e) {
            conn.send(control_error("request", e.message()));
            return;
        }
    }
    // xen-dumpd --live: a consistent pre-copy.
    if (request.contains("precopy")) {
        try {
            req.precopy = precopy_of_request(request);
            if (req.live) throw Error("a request is live consistent (precopy) or live inconsistent, not both");
        } catch (const Error& e) {
            conn.send(control_error("request", e.message()));
            return;
        }
    }
    // --live=no, or any --live: the configuration's Live= does not apply.
    if (request.contains("paused") && !request["paused"].is_boolean()) {
        conn.send(control_error("request", "paused must be true or false"));
        return;
    }
    req.live_asked = req.live || req.precopy.on || request.value("paused", false);
    // xen-dumpd -r/-R: the dump is encrypted to these instead of the configured recipients.
    if (request.contains("recipients")) {
        try {
            req.recipients = recipients_of_request(request);
        } catch (const Error& e) {
            conn.send(control_error("request", e.message()));
            return;
        }
    }
    std::string domain = request.value("domain", "");
    std::string label;
    try {
        std::lock_guard lock(mutex_);
        req.domid = resolve_domain(*hv_, domain);
        label = hv_->domain_name(req.domid);
    } catch (const Error& e) {
        conn.send(control_error("request", e.what()));
        return;
    }
    if (label.empty()) label = "domain " + std::to_string(req.domid);
    auto job = queue_->submit(req, label);
    log_message(LogLevel::info, "request to dump " + label + " (domain " + std::to_string(req.domid) + ") queued as job " +
                                    std::to_string(job->id),
                {{"DOMID", std::to_string(req.domid)}, {"DOMAIN", label}});
    try {
        follow_dump_job(conn, job);
    } catch (...) {
        // The requester went away or stopped reading: its dump goes with it.
        queue_->cancel(job->id);
        throw;
    }
}

void Service::follow_dump_job(JsonLineConnection& conn, const std::shared_ptr<Job>& job) {
    conn.send({{"event", "queued"}, {"id", job->id}});
    JobState seen = JobState::queued;
    uint64_t last_done = UINT64_MAX;
    bool last_finding = false;
    unsigned last_round = 0;
    bool last_final = false;
    for (;;) {
        queue_->wait_for_change(*job, seen, std::chrono::milliseconds(200));
        // A requester that hangs up (Ctrl-C) takes its dump with it.
        if (conn.peer_closed()) {
            queue_->cancel(job->id);
            return;
        }
        JobState now = queue_->state_of(*job);
        if (now != seen && now == JobState::running) {
            conn.send({{"event", "started"}, {"id", job->id}});
        }
        seen = now;
        if (now == JobState::finished) break;
        // Before the pass, the pfns examined (finding_pages) tell the progress.
        const bool finding = job->finding_pages;
        const uint64_t done = finding ? job->pfns_done.load() : job->bytes_done.load();
        // After the pass, a live dump's rounds (live_final last: it is set first).
        const bool final = job->live_final;
        const unsigned round = job->live_round;
        if (now == JobState::running &&
            (done != last_done || finding != last_finding || round != last_round || final != last_final)) {
            last_done = done;
            last_finding = finding;
            last_round = round;
            last_final = final;
            nlohmann::json progress = {{"event", "progress"},
                                       {"id", job->id},
                                       {"bytes_done", job->bytes_done.load()},
                                       {"bytes_total", job->bytes_total.load()}};
            if (finding) {
                progress["finding_pages"] = true;
                progress["pfns_done"] = done;
                progress["pfns_total"] = job->pfns_total.load();
            }
            add_live_round(progress, round, job->dirty_pages.load(), final);
            conn.send(progress);
        }
    }
    const DumpJobResult& r = *job->result;
    conn.send({{"event", "finished"},
               {"id", job->id},
               {"result", to_string(r.result)},
               {"path", r.result == DumpOutcome::ok ? r.path.string() : std::string()},
               {"sidecar", r.sidecar.string()},
               {"error", r.error},
               {"warnings", r.warnings}});
}

}  // namespace xendump::daemon
