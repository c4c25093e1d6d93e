#include "dump_job.hpp"

#include "crash_signature.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <set>

#include "cli.hpp"
#include "dump_dir.hpp"
#include "guest_log.hpp"
#include "journal_log.hpp"
#include "retention.hpp"
#include "uploader.hpp"
#include "util/util.hpp"
#include "util/vocabulary.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/reader.hpp"
#include "xendump/recipients.hpp"
#include "xendump/text.hpp"

namespace xendump::daemon {

namespace fs = std::filesystem;

namespace {

// Dumps running in this process: their names are taken, and the room each
// was granted is spoken for, although their files are invisible temporaries
// (whose blocks, `occupied`, are already gone from the free space).
struct InFlight {
    uint64_t granted = 0;
    uint64_t occupied = 0;
};
std::mutex g_inflight_mutex;
std::map<fs::path, InFlight> g_inflight;
// One room decision at a time: two growing dumps never take the same room.
std::mutex g_room_mutex;

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

uint64_t blocks_of(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

// The other dumps being written, as a room decision counts them.
struct OtherDumps {
    std::set<fs::path> paths;  // every dump being written, this one included: never removed
    uint64_t granted = 0;
    uint64_t occupied = 0;
};

// Reserves a unique name and the room granted until the object dies.
class Reservation {
public:
    Reservation(const fs::path& dir, const std::string& base, uint64_t granted) {
        std::lock_guard lock(g_inflight_mutex);
        fs::path p = unique_dump_path(dir, base);
        for (unsigned n = 1; g_inflight.count(p); ++n)
            p = unique_dump_path(dir, numbered_dump_name(base, n));
        path_ = p;
        g_inflight[path_] = InFlight{granted, 0};
    }
    ~Reservation() {
        std::lock_guard lock(g_inflight_mutex);
        g_inflight.erase(path_);
    }
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    const fs::path& path() const { return path_; }
    void update(uint64_t granted, uint64_t occupied) {
        std::lock_guard lock(g_inflight_mutex);
        g_inflight[path_] = InFlight{granted, occupied};
    }
    OtherDumps others() const {
        std::lock_guard lock(g_inflight_mutex);
        OtherDumps o;
        for (const auto& [p, f] : g_inflight) {
            o.paths.insert(p);
            if (p == path_) continue;
            o.granted += f.granted;
            o.occupied += f.occupied;
        }
        return o;
    }

private:
    fs::path path_;
};

// The storage limits applied to a dump about to take `needed` (its first
// step, or more as it grows) of which `occupied` is on disk already. The
// dumps being written count with their grants, as if not on disk yet.
struct RoomQuestion {
    std::vector<StoredDump> stored;
    FilesystemSpace space;
    uint64_t others = 0;
};
RoomQuestion room_question(const Config& config, const Reservation& self, uint64_t occupied) {
    const OtherDumps others = self.others();
    RoomQuestion q;
    q.stored = to_stored(scan_dump_dir(config.dump_dir), others.paths);
    q.space = filesystem_space(config.dump_dir);
    q.space.free += others.occupied + occupied;
    q.others = others.granted;
    return q;
}

// WriteOptions::room of a dump job: MaxUse= and KeepFree= applied to what
// the file occupies as it grows (grant_room), old dumps removed only when
// its next step needs their room, never a dump being written. A refusal
// keeps its figures for the record.
class GrowingRoom {
public:
    GrowingRoom(const Config& config, Reservation& self) : config_(config), self_(self) {}

    uint64_t operator()(uint64_t occupied, uint64_t needed, uint64_t wanted) {
        std::lock_guard lock(g_room_mutex);
        const RoomQuestion q = room_question(config_, self_, occupied);
        const RoomGrant g =
            grant_room(q.stored, limits_of(config_), q.space, unix_now(), q.others + needed, q.others + wanted);
        if (g.granted < q.others + needed) {
            refused_ = "not enough room: " + g.why_not + " (the dump occupied " + cli::human_bytes(occupied) +
                       " of at most " + cli::human_bytes(wanted) + " and needed " +
                       cli::human_bytes(needed - occupied) + " more to go on)";
            refused_needed_ = needed;
            return 0;
        }
        remove_dumps(g.remove, "storage limits: room for " + self_.path().filename().string() + " being written");
        const uint64_t granted = g.granted - q.others;
        self_.update(granted, occupied);
        return granted;
    }
    // Why the dump was stopped for want of room ("" when it was not), and the bytes it needed then.
    const std::string& refused() const { return refused_; }
    uint64_t refused_needed() const { return refused_needed_; }

private:
    const Config& config_;
    Reservation& self_;
    std::string refused_;
    uint64_t refused_needed_ = 0;
};

// Room for a dump's sidecar, taken before the dump starts and given back just
// before the sidecar is written: a dump that fails because the disk filled up
// must still be recorded. Its name starts with kSidecarRoomPrefix, so
// start-up cleanup (clean_temporaries) removes it if the service dies mid-dump.
class SidecarRoom {
public:
    static constexpr size_t kBytes = 64 * 1024;

    explicit SidecarRoom(const fs::path& dump_path)
        : path_(dump_path.parent_path() /
                (std::string(kSidecarRoomPrefix) + dump_path.filename().string())) {
        UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        if (!fd) return;  // best effort: without it the record may fail on a full disk
        std::string zeros(kBytes, '\0');
        if (util::write_full(fd.get(), zeros.data(), zeros.size()) != zeros.size()) {
            release();
            return;
        }
        held_ = true;
    }
    ~SidecarRoom() { release(); }
    SidecarRoom(const SidecarRoom&) = delete;
    SidecarRoom& operator=(const SidecarRoom&) = delete;

    void release() {
        std::error_code ec;
        fs::remove(path_, ec);
        held_ = false;
    }

private:
    fs::path path_;
    bool held_ = false;
};

// The storage limits applied once a dump is written (never removing it).
void vacuum_after(const Config& config, const fs::path& dump) {
    try {
        vacuum_dump_dir(config, dump);
    } catch (const Error& e) {
        log_message(LogLevel::warning, std::string("cannot apply storage limits: ") + e.what());
    }
}

// The guest kernel's log of a written dump into its record: a log that
// could not be read (or only in part) is said in the journal.
void keep_guest_log(Sidecar& s, GuestLogRecord& guest, ClearMetadata clear, const std::string& where) {
    if (!guest.log.error.empty() || guest.log.partial) {
        const std::string why = !guest.log.error.empty() ? guest.log.error : guest.log.damage.front();
        log_message(guest.kernel ? LogLevel::warning : LogLevel::info,
                    "dump of " + s.domain_name + " (domain " + std::to_string(s.domid) + "): " +
                        (guest.log.error.empty() ? "the guest kernel's log is incomplete: " : "no guest kernel log: ") +
                        why,
                    {{"DOMID", std::to_string(s.domid)}, {"DUMP_PATH", where}});
    }
    s.guest_log = std::move(guest.log);
    if (clear.panic) s.guest_panic = std::move(guest.panic);
    if (clear.backtrace) s.guest_backtrace = std::move(guest.backtrace);
}

// What the dumper says of a written dump, into its record.
void take_dump_result(Sidecar& s, const DumpResult& r, const DumpRequest& request, bool kdump) {
    if (kdump) s.dump_level = r.dump_level;  // the level applied
    s.pages = r.nr_pages;
    s.file_size = r.file_size;
    if (!r.uuid.empty()) s.uuid = r.uuid;
    s.type = std::string(format::to_string(r.type));
    if (r.live) {
        s.live = "precopy";
        s.pause_usec = r.live->pause_usec;
        s.live_rounds = r.live->rounds;
        s.pages_recopied = r.live->pages_recopied;
        if (r.live->restarts) s.live_restarts = r.live->restarts;
    } else if (request.live) {
        s.live = "inconsistent";
    }
}

// The journal entry of a dump's end, `where` it is (a file or an object).
void log_dump_end(const Sidecar& s, const fs::path& where) {
    const LogLevel level = s.result == DumpOutcome::ok          ? LogLevel::notice
                           : s.result == DumpOutcome::cancelled ? LogLevel::warning
                                                                : LogLevel::error;
    log_message(level, dump_journal_message(s, where), dump_journal_fields(s, where),
                s.result == DumpOutcome::ok ? kMessageDumpWritten : kMessageDumpFailed);
}

// Why a dump is not streamed by Mode=stream ("" when it is): what
// dump_domain_to_object does not write (a consistent live dump it does,
// from its temporary image once its final round is done: dump/live_image.hpp).
std::string not_streamed(const std::vector<std::string>& recipients) {
    if (!recipients.empty()) return "an encrypted dump is not streamed to object storage yet";
    return {};
}

std::span<const std::byte> bytes_of(std::string_view text) { return std::as_bytes(std::span(text)); }

// Mode=stream (DumpJobHooks::stream): the dump into its object, then its
// kernel log (read from the paused guest: there is no file to read back)
// and its sidecar beside it. True when the job is done with (written, or
// cancelled); false when the stream failed (out.stream_error): the caller
// writes the dump to the dump directory instead. Nothing is written to
// the dump directory here, unless the sidecar cannot reach the store after
// the dump did (then it is kept there, so the dump's record is not lost).
bool stream_dump(Hypervisor& hv, const Config& config, const DumpRequest& request, const DumpJobHooks& hooks,
                 DumpOptions options, DumpJobResult& out) {
    Sidecar& s = out.info;
    const DumpJobHooks::Stream& to = *hooks.stream;
    const fs::path local = out.path;
    const std::string name = local.filename().string();
    const s3::Url url{to.upload.bucket, upload_key(to.upload, to.host, name)};
    std::optional<GuestLogCapture> captured;
    options.inspect_guest = [&captured](const GuestView& guest, const kernel::Vmcoreinfo* info) {
        captured = capture_guest_log(guest, info);
    };
    if (hooks.on_start) hooks.on_start(url.str());
    std::unique_ptr<s3::Client> client;
    try {
        client = upload_client(to.upload);
        s3::UploadOptions up;
        up.part_size = to.upload.part_size;
        up.in_flight = to.upload.in_flight;
        // What the record knows before the dump; its size and panic line
        // are in the sidecar object (and the object's own size).
        up.metadata = upload_metadata(s);
        up.metadata.erase("size");
        const DumpResult r = dump_domain_to_object(hv, request.domid, *client, url, options, up);
        take_dump_result(s, r, request, false);
        out.warnings = r.warnings;
    } catch (const std::exception& e) {
        const auto* cancel = hooks.dump.write.cancel;
        if (cancel && cancel->load()) {
            // Cancelled (a request, the service stopping): no record in the
            // dump directory, the upload aborted, the journal says so.
            s.result = out.result = DumpOutcome::cancelled;
            s.error = out.error = e.what();
            s.end_time = unix_now();
            s.digests = "none";
            log_dump_end(s, url.str());
            return true;
        }
        out.stream_error = e.what();
        log_message(LogLevel::warning,
                    "streaming the dump of " + s.domain_name + " (domain " + std::to_string(s.domid) + ") to " +
                        url.str() + " failed: " + out.stream_error + "; writing it to " + local.string() +
                        " instead, uploaded once the store can be reached",
                    {{"DOMID", std::to_string(s.domid)},
                     {"UPLOAD_TARGET", url.str()},
                     {"UPLOAD_ERROR", out.stream_error},
                     {"DUMP_PATH", local.string()}},
                    kMessageUploadFailed);
        return false;
    }
    out.streamed = true;
    out.path = url.str();
    out.sidecar = s3::Url{url.bucket, url.key + ".json"}.str();
    s.result = out.result = DumpOutcome::ok;
    s.end_time = unix_now();
    // The kernel log, then the sidecar (last: a sidecar in the store always
    // stands beside a complete dump), as the uploader orders them.
    std::optional<std::string> dmesg_text;
    if (captured) {
        dmesg_text = std::move(captured->text);
        if (dmesg_text) captured->record.log.dmesg_file = dmesg_path(local).filename().string();
        keep_guest_log(s, captured->record, ClearMetadata{true, true}, url.str());  // a plain dump: in clear
    }
    const std::map<std::string, std::string> metadata = upload_metadata(s);
    try {
        if (dmesg_text)
            client->put_object({url.bucket, upload_key(to.upload, to.host, dmesg_path(local).filename().string())},
                               bytes_of(*dmesg_text), metadata);
        client->put_object({url.bucket, upload_key(to.upload, to.host, sidecar_path(local).filename().string())},
                           bytes_of(s.to_json()), metadata);
    } catch (const std::exception& e) {
        log_message(LogLevel::error,
                    "the dump is in " + url.str() + ", but its record could not follow it (kept in " +
                        config.dump_dir.string() + " instead): " + e.what(),
                    {{"DOMID", std::to_string(s.domid)}, {"UPLOAD_TARGET", url.str()}});
        try {
            if (dmesg_text) write_file_atomically(dmesg_path(local), *dmesg_text, 0600);
            write_sidecar(sidecar_path(local), s);
        } catch (const std::exception& le) {
            log_message(LogLevel::error, std::string("cannot record the dump: ") + le.what(),
                        dump_journal_fields(s, url.str()));
        }
    }
    log_dump_end(s, url.str());
    return true;
}

}  // namespace

std::string guest_backtrace_line(const GuestBacktrace& b) {
    std::string out = "vcpu " + std::to_string(b.vcpu) + " (" + b.method + "): ";
    for (size_t i = 0; i < b.frames.size(); ++i) out += (i ? " < " : "") + b.frames[i];
    if (!b.stopped.empty()) out += " (partial)";
    return out;
}

LogFields dump_journal_fields(const Sidecar& s, const fs::path& dump) {
    LogFields fields{{vocab::kDomid.journal, std::to_string(s.domid)},
                     {vocab::kDomainName.journal, s.domain_name},
                     {vocab::kUuid.journal, s.uuid},
                     {vocab::kDumpPath.journal, dump.string()},
                     {vocab::kReason.journal, s.reason},
                     {vocab::kResult.journal, to_string(s.result)},
                     {vocab::kSizeOnDisk.journal, std::to_string(s.bytes_on_disk)},
                     {vocab::kFormat.journal, s.format}};
    if (s.compression) fields.emplace_back(vocab::kCompression.journal, *s.compression);
    if (s.dump_level) fields.emplace_back(vocab::kDumpLevel.journal, std::to_string(*s.dump_level));
    if (s.recipients) {
        fields.emplace_back(vocab::kEncrypted.journal, "1");
        fields.emplace_back(vocab::kRecipients.journal, std::to_string(s.recipients));
    }
    if (s.live) fields.emplace_back(vocab::kLive.journal, *s.live);
    if (s.pause_usec) fields.emplace_back(vocab::kPauseUsec.journal, std::to_string(*s.pause_usec));
    if (s.live_rounds) fields.emplace_back(vocab::kLiveRounds.journal, std::to_string(*s.live_rounds));
    if (s.pages_recopied) fields.emplace_back(vocab::kPagesRecopied.journal, std::to_string(*s.pages_recopied));
    if (s.live_restarts) fields.emplace_back(vocab::kLiveRestarts.journal, std::to_string(*s.live_restarts));
    if (s.guest_panic) fields.emplace_back(vocab::kGuestPanic.journal, *s.guest_panic);
    if (s.guest_backtrace) fields.emplace_back(vocab::kGuestBacktrace.journal, guest_backtrace_line(*s.guest_backtrace));
    if (auto signature = crash_signature(s)) fields.emplace_back(vocab::kCrashSignature.journal, *signature);
    if (s.guest_log && !s.guest_log->dmesg_file.empty())
        fields.emplace_back(vocab::kDmesgPath.journal, dmesg_path(dump).string());
    return fields;
}

std::string dump_journal_message(const Sidecar& s, const fs::path& dump) {
    const std::string what = "dump of " + s.domain_name + " (domain " + std::to_string(s.domid) + ")";
    if (s.result != DumpOutcome::ok) return what + " " + to_string(s.result) + ": " + s.error;
    std::string message = what + " written to " + dump.string();
    // The panic line and the frames are escaped already (as dmesg prints
    // them); the message is escaped once, where it is logged (journal_log.hpp).
    if (s.guest_panic) message += "; the guest's log: " + unescape_text(*s.guest_panic);
    if (s.guest_backtrace) message += "; backtrace: " + unescape_text(guest_backtrace_line(*s.guest_backtrace));
    return message;
}

nlohmann::json dump_format_json(const DumpFormat& format) {
    nlohmann::json j = {{"format", format.kdump ? "kdump" : "v1"}};
    if (format.kdump) {
        j["compress"] = std::string(to_string(format.compression));
        j["dump_level"] = format.dump_level;
    }
    return j;
}

DumpFormat dump_format_of_request(const nlohmann::json& request) {
    DumpFormat f;
    const auto& name = request.at("format");
    if (!name.is_string() || (name != "v1" && name != "kdump")) throw Error("format must be \"v1\" or \"kdump\"");
    f.kdump = name == "kdump";
    if (request.contains("compress")) {
        if (!request["compress"].is_string()) throw Error("compress must be a string");
        f.compression = compression_from_string(request["compress"].get<std::string>());
    }
    if (request.contains("dump_level")) {
        const auto& level = request["dump_level"];
        if (!level.is_number_unsigned() || level.get<uint64_t>() > kernel::kMaxDumpLevel)
            throw Error("dump_level must be a number from 0 to 31");
        f.dump_level = level.get<unsigned>();
    }
    if (f.dump_level != 0 && !f.kdump) throw Error("dump_level needs format kdump");
    return f;
}

nlohmann::json precopy_json(const DumpOptions::Precopy& p) {
    return {{"max_pause_us", p.max_pause.count()}, {"max_rounds", p.max_rounds}, {"leave_paused", p.leave_paused}};
}

DumpOptions::Precopy precopy_of_request(const nlohmann::json& request) {
    const auto& j = request.at("precopy");
    if (!j.is_object()) throw Error("precopy must be an object");
    DumpOptions::Precopy p;
    p.on = true;
    if (j.contains("max_pause_us")) {
        if (!j["max_pause_us"].is_number_unsigned()) throw Error("precopy.max_pause_us must be a number");
        p.max_pause = std::chrono::microseconds(j["max_pause_us"].get<uint64_t>());
    }
    if (j.contains("max_rounds")) {
        if (!j["max_rounds"].is_number_unsigned() || j["max_rounds"].get<uint64_t>() > kMaxLiveRounds)
            throw Error("precopy.max_rounds must be a number from 0 to " + std::to_string(kMaxLiveRounds));
        p.max_rounds = j["max_rounds"].get<unsigned>();
    }
    if (j.contains("leave_paused")) {
        if (!j["leave_paused"].is_boolean()) throw Error("precopy.leave_paused must be true or false");
        p.leave_paused = j["leave_paused"].get<bool>();
    }
    return p;
}

std::vector<std::string> recipients_of_request(const nlohmann::json& request) {
    const auto& list = request.at("recipients");
    if (!list.is_array() || list.empty()) throw Error("recipients must be an array of recipients, at least one");
    std::vector<std::string> out;
    for (size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_string()) throw Error("recipients must be an array of strings");
        try {
            out.push_back(parse_recipient(list[i].get<std::string>()));
        } catch (const Error& e) {
            throw Error("recipient " + std::to_string(i + 1) + ": " + e.message());
        }
    }
    return out;
}

uint64_t estimate_dump_size(const DomainInfo& info) {
    // Pages, plus per page a PFN->GMFN entry (16 bytes), an xxh64 digest and a
    // .xen_pfn entry (8 + 8), plus 1 MiB for headers, notes and vcpu contexts.
    uint64_t pages = std::max(info.tot_pages, uint64_t{1});
    return pages * (4096 + 32) + (uint64_t{1} << 20);
}

uint64_t first_room(const DomainInfo& info) { return std::min(kRoomStep, estimate_dump_size(info)); }

DumpRequest with_live_default(DumpRequest request, const Config& config) {
    if (request.reason != format::Reason::request || request.live_asked) return request;
    switch (config.live) {
    case LiveDefault::no:
        break;
    case LiveDefault::inconsistent:
        request.live = true;
        break;
    case LiveDefault::consistent:
        request.precopy.on = true;
        request.precopy.max_pause = config.max_pause;
        request.precopy.max_rounds = config.live_rounds;
        break;
    }
    return request;
}

DumpJobResult run_dump_job(Hypervisor& hv, const Config& config, const DumpRequest& asked,
                           const DumpJobHooks& hooks) {
    const DumpRequest request = with_live_default(asked, config);
    DumpJobResult out;
    Sidecar& s = out.info;
    s.domid = request.domid;
    s.reason = std::string(format::to_string(request.reason));
    s.start_time = unix_now();
    s.digests = request.digests ? "written" : "none";

    auto info = hv.domain_info(request.domid);
    s.domain_name = hv.domain_name(request.domid);
    const DumpFormat how = request.file_format ? *request.file_format : config.format_for(s.domain_name);
    s.format = how.kdump ? "kdump" : "v1";
    if (how.kdump) {
        s.compression = std::string(to_string(how.compression));
        s.dump_level = how.dump_level;
    }
    if (s.domain_name.empty()) s.domain_name = "domain" + std::to_string(request.domid);
    // Encrypted (the request's recipients, else the configuration's for the
    // guest): NAME.core.age, and nothing read from its pages kept in clear.
    const std::vector<std::string> recipients =
        request.recipients ? *request.recipients : config.recipients_for(s.domain_name);
    s.recipients = static_cast<unsigned>(recipients.size());
    // Room is counted from what the file occupies (zero pages are holes), so
    // a dump starts with room for its first step and asks for more as it
    // grows (GrowingRoom), not for the whole guest's size.
    uint64_t first = 0;
    if (info) {
        s.uuid = uuid_to_string(info->handle);
        s.type = std::string(format::to_string(info->type()));
        s.pages = info->tot_pages;
        first = first_room(*info);
    }

    ensure_dump_dir(config);
    Reservation name(config.dump_dir, dump_file_name(s.domain_name, request.domid, s.start_time, !recipients.empty()), first);
    out.path = name.path();
    out.sidecar = sidecar_path(out.path);
    s.dump_file = out.path.filename().string();
    std::optional<SidecarRoom> room;

    auto finish = [&](DumpOutcome result, const std::string& error) {
        room.reset();
        s.result = result;
        s.error = error;
        s.end_time = unix_now();
        out.result = result;
        out.error = error;
        if (result == DumpOutcome::ok) s.bytes_on_disk = blocks_of(out.path);
        else s.digests = "none";
        try {
            // Any failure here (a full disk, std::bad_alloc) leaves the
            // dump's own result as it is: the dump is written.
            write_sidecar(out.sidecar, s);
        } catch (const std::exception& e) {
            log_message(LogLevel::error, std::string("cannot record the dump: ") + e.what(),
                        dump_journal_fields(s, out.path));
        }
        log_dump_end(s, out.path);
        return out;
    };

    if (!info) return finish(DumpOutcome::failed, "no domain " + std::to_string(request.domid));

    DumpOptions options = hooks.dump;
    options.live = request.live;
    options.precopy = request.precopy;
    options.precopy.records = logdirty_records_dir(config);
    options.reason = request.reason;
    options.write.digests = request.digests;
    options.write.threads = request.threads;
    options.kdump = how.kdump;
    options.compression = how.compression;
    options.dump_level = how.dump_level;
    options.write.recipients = recipients;
    if (hooks.stream) {
        const std::string why_not = not_streamed(recipients);
        if (why_not.empty()) {
            name.update(0, 0);  // nothing of it in the dump directory (unless the stream fails)
            if (stream_dump(hv, config, request, hooks, options, out)) return out;
        } else {
            log_message(LogLevel::info, "dump of " + s.domain_name + " (domain " + std::to_string(s.domid) +
                                            "): " + why_not + ": written to " + out.path.string() +
                                            ", then uploaded (as Mode=spool)",
                        {{"DOMID", std::to_string(s.domid)}, {"DUMP_PATH", out.path.string()}});
        }
    }

    // Space first: a dump without room for its first step is refused before the guest is touched.
    try {
        std::lock_guard lock(g_room_mutex);
        const RoomQuestion q = room_question(config, name, 0);
        auto decision = decide_retention(q.stored, limits_of(config), q.space, s.start_time, first + q.others);
        remove_dumps(decision.remove, "storage limits");
        if (!decision.fits) {
            out.room_needed = first;
            return finish(DumpOutcome::refused, "not enough room: " + decision.why_not);
        }
    } catch (const Error& e) {
        return finish(DumpOutcome::failed, e.what());
    }
    GrowingRoom growing(config, name);

    room.emplace(out.path);
    if (hooks.on_start) hooks.on_start(out.path);
    // An encrypted dump's log is read from the paused guest: the file cannot
    // be read back (guest_log.hpp).
    std::optional<GuestLogCapture> captured;
    if (!recipients.empty())
        options.inspect_guest = [&captured](const GuestView& guest, const kernel::Vmcoreinfo* info) {
            captured = capture_guest_log(guest, info);
        };
    options.write.room = [&growing](uint64_t occupied, uint64_t needed, uint64_t wanted) {
        return growing(occupied, needed, wanted);
    };
    try {
        DumpResult r = dump_domain_to_file(hv, request.domid, out.path, options);
        take_dump_result(s, r, request, how.kdump);
        out.warnings = r.warnings;
    } catch (const std::exception& e) {
        // Stopped for want of room: refused with the figures, nothing left
        // behind (the unpublished file is gone with the writer).
        if (!growing.refused().empty()) {
            out.room_needed = growing.refused_needed();
            return finish(DumpOutcome::refused, growing.refused());
        }
        const auto* cancel = hooks.dump.write.cancel;
        bool cancelled = cancel && cancel->load();
        return finish(cancelled ? DumpOutcome::cancelled : DumpOutcome::failed, e.what());
    }
    // The service holds no private key: an encrypted file is not read back
    // (no zero pages); its log, read from the paused guest, is saved
    // encrypted as NAME.dmesg.txt.age, and only what ClearMetadata= allows
    // of it is kept in clear (xen-dumpd(8)).
    if (!recipients.empty()) {
        if (captured) {
            save_encrypted_guest_log(out.path, *captured, recipients);
            keep_guest_log(s, captured->record, config.clear_metadata_for(s.domain_name), out.path.string());
        }
        finish(DumpOutcome::ok, {});
        vacuum_after(config, out.path);
        return out;
    }
    // A compact file's zero pages, as info counts them (its descriptors).
    if (how.kdump) {
        try {
            s.zero_pages = DumpReader::open(out.path).zero_pages();
        } catch (const Error&) {
            // Left out: the file's check and the guest log below say what is wrong.
        }
    }
    // The guest runs again (or stays crashed) by now: its log is read from
    // the finished file, while the room for the sidecar is still held, and
    // whatever fails there is recorded, never failing the dump.
    GuestLogRecord guest = record_guest_log(out.path);
    keep_guest_log(s, guest, ClearMetadata{true, true}, out.path.string());  // a plain dump is in clear anyway
    finish(DumpOutcome::ok, {});
    vacuum_after(config, out.path);
    return out;
}

}  // namespace xendump::daemon
