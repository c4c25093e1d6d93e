// One dump into the dump directory, with everything the storage policy asks
// around it: a fresh name, the size check before starting (refused dumps are
// recorded, not started), the dump itself through the shared library call,
// the sidecar whatever happens, the journal entry, and a vacuum afterwards.
// Shared by the service's queue and the one-shot `xen-dumpd --domain`.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "journal_log.hpp"
#include "sidecar.hpp"
#include "xendump/kdump.hpp"
#include "xendump/dumper.hpp"
#include "xendump/format.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump::daemon {

struct DumpRequest {
    uint32_t domid = 0;
    format::Reason reason = format::Reason::request;
    bool live = false;                // --live=inconsistent
    DumpOptions::Precopy precopy;     // --live: a consistent pre-copy (precopy.on)
    // The requester said how (--live, --live=inconsistent or --live=no):
    // else a request takes the configuration's Live= (with_live_default).
    bool live_asked = false;
    bool digests = true;
    // How the dump is written (xen-dumpd --format ...); unset: the
    // configuration's for the guest's name (Config::format_for).
    std::optional<DumpFormat> file_format;
    unsigned threads = 1;  // WriteOptions::threads (Config::write_threads(), or the requester's)
    // Whom the dump is encrypted to (xen-dumpd -r/-R, canonical form);
    // unset: the configuration's for the guest (Config::recipients_for).
    std::optional<std::vector<std::string>> recipients;
};

// DumpFormat in a dump request on the control socket ("format", and for
// kdump "compress" and "dump_level"), and back. dump_format_of_request
// throws Error for a value xen-dumpd --format/--compress/--dump-level
// would refuse.
nlohmann::json dump_format_json(const DumpFormat& format);
DumpFormat dump_format_of_request(const nlohmann::json& request);
// A dump request's "recipients" (an array of recipient strings, at least
// one), each checked; throws Error naming the one that does not parse.
std::vector<std::string> recipients_of_request(const nlohmann::json& request);
// A consistent live dump's settings in a dump request ("precopy": an object
// of max_pause_us, max_rounds, leave_paused), and back; Error for a value
// xen-dumpd --max-pause/--live-rounds would refuse.
inline constexpr unsigned kMaxLiveRounds = 100;
nlohmann::json precopy_json(const DumpOptions::Precopy& p);
DumpOptions::Precopy precopy_of_request(const nlohmann::json& request);

// `request` with the configuration's Live=, MaxPause= and LiveRounds= when
// it is a request that did not say how (never a crash dump: its guest is
// stopped already).
DumpRequest with_live_default(DumpRequest request, const Config& config);

struct DumpJobResult {
    DumpOutcome result = DumpOutcome::failed;
    std::filesystem::path path;     // the dump (absent unless result is ok); streamed: s3://BUCKET/KEY
    std::filesystem::path sidecar;  // always written when the dump dir is usable; streamed: its object's s3:// URL
    // Mode=stream (DumpJobHooks::stream): true when the dump went into the
    // store (path names the object, nothing is in the dump directory).
    bool streamed = false;
    // Mode=stream: why streaming failed, the dump then written to the dump
    // directory instead (path) for the uploader ("" when it did not fail).
    std::string stream_error;
    std::string error;
    std::vector<std::string> warnings;  // the dumper's (DumpResult::warnings)
    Sidecar info;
    // Refused for want of room: the bytes the dump needed then (its first
    // step, or what it occupied and its next step when it outgrew its room).
    uint64_t room_needed = 0;
};

struct DumpJobHooks {
    std::function<void(const std::filesystem::path&)> on_start;  // the name chosen
    // Progress, warnings, cancel (dump.write) go to the dumper as they are;
    // the request's live, reason, digests and threads replace dump's own.
    DumpOptions dump;
    // [Upload] Mode=stream: the dump goes straight into the object
    // PREFIX/HOST/NAME (upload_key, NAME as the dump directory would have
    // it), its kernel log and sidecar beside it, nothing into the dump
    // directory. A crash dump is never lost: a stream that fails (the store
    // unreachable, refusing, erring) is aborted and the dump written to the
    // dump directory instead (DumpJobResult::stream_error says why) for the
    // uploader. A dump the library does not stream (Format=kdump, encrypted,
    // a consistent live one) is written to the dump directory too.
    struct Stream {
        UploadConfig upload;
        std::string host;  // HOST of the keys
    };
    std::optional<Stream> stream;
};

// The journal entry of a dump (or of its failure): DOMID=, DOMAIN=,
// DOMAIN_UUID=, DUMP_PATH=, DUMP_REASON=, DUMP_RESULT=, DUMP_SIZE=,
// DUMP_FORMAT= (and for a compact file DUMP_COMPRESSION=, DUMP_LEVEL=), and for a
// dump whose guest log was read GUEST_PANIC= (its panic line),
// GUEST_BACKTRACE= (guest_backtrace_line of the vcpu that reported it) and
// GUEST_DMESG_PATH=; the message names the dump, and the panic line and
// backtrace too, unescaped: log_message escapes the whole message once.
LogFields dump_journal_fields(const Sidecar& s, const std::filesystem::path& dump);
std::string dump_journal_message(const Sidecar& s, const std::filesystem::path& dump);
// "vcpu 0 (orc): panic+0x118 < sysrq_handle_crash+0x16 < ..." (innermost
// first; "(partial)" at the end of a walk that stopped early).
std::string guest_backtrace_line(const GuestBacktrace& b);

// A conservative size for a dump of `info` before its p2m is read: every
// page present plus the per-page table entries, digests and headers.
uint64_t estimate_dump_size(const DomainInfo& info);
// The room a dump of `info` needs to start: its first step (kRoomStep), or
// the whole estimate when smaller; it asks for more as its file grows.
uint64_t first_room(const DomainInfo& info);

// Never throws for dump failures: they are recorded and returned. Throws
// Error only when not even the sidecar can be written (dump dir unusable).
DumpJobResult run_dump_job(Hypervisor& hv, const Config& config, const DumpRequest& request,
                           const DumpJobHooks& hooks = {});

}  // namespace xendump::daemon
