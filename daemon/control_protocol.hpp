// The control socket's protocol: a Unix stream socket (default
// /run/xen-dumpd/control.sock) carrying one JSON object per line each way.
//
//   -> {"command":"dump","domain":"web01","live":false,"digests":true}
//      (optional "threads":N, 1..kMaxWriteThreads (64): else the service's Threads=)
//      (optional "format":"v1"|"kdump" with "compress":ALG and "dump_level":N
//      for kdump: else the configuration's Format=, Compress=, DumpLevel= for
//      the domain)
//      (optional "recipients":["age1…", "ssh-ed25519 …", …], at least one: the
//      dump is encrypted to them, NAME.core.age, instead of to the
//      configuration's Recipient=/RecipientsFile= for the domain; xen-dumpd -r/-R)
//   <- {"event":"queued","id":3}
//   <- {"event":"started","id":3,"path":"/var/lib/xen/dump/web01-7-....core"}
//   <- {"event":"progress","id":3,"bytes_done":N,"bytes_total":M}   (repeated)
//      (before the page pass, while the guest's pages are found: also
//      "finding_pages":true,"pfns_done":P,"pfns_total":Q, the pfns examined
//      of the p2m size; bytes are 0 then)
//      (a live dump after its pass: also "live_round":N,"dirty_pages":M,
//      "live_final":BOOL, once a pre-copy round: the pages it copies again,
//      live_final when the guest is paused for the last round)
//   <- {"event":"finished","id":3,"result":"ok","path":"...","error":"","warnings":[...]}
//      (warnings: what the dumper said of the guest, e.g. a dump level it cannot support)
//   -> {"command":"status"}
//   <- {"event":"status","host":"...","dump_dir":"...","jobs":[{"id":..,"state":"running",...}],
//       "crashes_waiting_for_room":[...], "upload_target":"s3://BUCKET/PREFIX" ([Upload] set),
//       "uploads":[{"dump":PATH,"target":"s3://BUCKET/KEY","state":"uploading"|"waiting",
//                   "bytes_done":N,"bytes_total":M,"attempts":N,"error":"why it waits",
//                   "next_attempt":UNIX_SECONDS}]}
//      (a job: id, state, domid, domain, reason, bytes_done, bytes_total,
//      path; before its page pass also finding_pages, pfns_done, pfns_total;
//      a live dump after its pass also live_round, dirty_pages, live_final)
//   -> {"command":"cancel","id":3}
//   <- {"event":"cancelled","id":3}
//   any error (also "permission denied", checked with SO_PEERCRED before
//   anything is read; a line that is not a JSON object; no request within
//   the idle limit):
//   <- {"event":"error","kind":"permission"|"request"|"mismatch"|"busy","message":"..."}
//
// A dump requester that disconnects before "finished", or stops reading its
// replies, cancels its dump.
#pragma once

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xendump/fd.hpp"

namespace xendump::daemon {

// A line-oriented JSON connection over a stream socket.
class JsonLineConnection {
public:
    explicit JsonLineConnection(UniqueFd fd) : fd_(std::move(fd)) {}
    int fd() const { return fd_.get(); }
    // Throws Error when the peer went away.
    void send(const nlohmann::json& message);
    // Waits up to `timeout` (negative: forever) for a line; nullopt on
    // timeout. Throws Error on EOF, a bad line, or a line over 1 MiB.
    std::optional<nlohmann::json> receive(std::chrono::milliseconds timeout);
    // The same without parsing: the raw line (without its newline).
    std::optional<std::string> receive_line(std::chrono::milliseconds timeout);
    // True when the peer closed its end (checked without blocking).
    bool peer_closed();

private:
    UniqueFd fd_;
    std::string buffer_;
};

// One control message: a JSON object on one line. Throws Error naming the
// byte where the line stops being one.
nlohmann::json parse_control_message(const std::string& line);

// {"event":"error","kind":KIND,"message":MESSAGE}
nlohmann::json control_error(const std::string& kind, const std::string& message);

// Connects to the service. nullopt when no service listens there (no
// socket, or a stale one); Error for anything else (e.g. permission).
std::optional<JsonLineConnection> connect_control(const std::filesystem::path& socket_path);

// Sends one request and returns the first reply (status, cancel, vacuum).
nlohmann::json control_request(const std::filesystem::path& socket_path, const nlohmann::json& request,
                               std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace xendump::daemon
