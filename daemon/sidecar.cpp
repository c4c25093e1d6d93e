#include "sidecar.hpp"

#include "crash_signature.hpp"

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/util.hpp"
#include "util/vocabulary.hpp"
#include "xendump/error.hpp"
#include "xendump/text.hpp"
#include "xendump/fd.hpp"

namespace xendump::daemon {

std::string to_string(DumpOutcome r) {
    switch (r) {
        case DumpOutcome::ok: return "ok";
        case DumpOutcome::failed: return "failed";
        case DumpOutcome::refused: return "refused";
        case DumpOutcome::cancelled: return "cancelled";
    }
    return "failed";
}

DumpOutcome outcome_from_string(const std::string& s) {
    if (s == "ok") return DumpOutcome::ok;
    if (s == "failed") return DumpOutcome::failed;
    if (s == "refused") return DumpOutcome::refused;
    if (s == "cancelled") return DumpOutcome::cancelled;
    throw Error("unknown result \"" + s + "\"");
}

namespace {

std::string to_hex(std::string_view bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) {
        out += kHex[c >> 4];
        out += kHex[c & 15];
    }
    return out;
}

std::string from_hex(const std::string& hex) {
    auto nibble = [&](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        throw Error("domain_bytes is not hexadecimal");
    };
    if (hex.size() % 2) throw Error("domain_bytes has an odd length");
    std::string out;
    for (size_t i = 0; i < hex.size(); i += 2) out += static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
    return out;
}

}  // namespace

std::string Sidecar::to_json() const {
    nlohmann::ordered_json j;
    j[vocab::kDomainName.sidecar] = domain_name;
    // JSON strings are UTF-8: a name that is not keeps its exact bytes here
    // ("domain" then has U+FFFD where they were not UTF-8).
    if (!is_utf8(domain_name)) j["domain_bytes"] = to_hex(domain_name);
    j[vocab::kDomid.sidecar] = domid;
    j[vocab::kUuid.sidecar] = uuid;
    j[vocab::kGuestType.sidecar] = type;
    j[vocab::kReason.sidecar] = reason;
    j["start_time"] = start_time;
    j["end_time"] = end_time;
    j[vocab::kPages.sidecar] = pages;
    j["file_size"] = file_size;
    j[vocab::kSizeOnDisk.sidecar] = bytes_on_disk;
    j[vocab::kDigests.sidecar] = digests;
    j[vocab::kResult.sidecar] = to_string(result);
    j[vocab::kError.sidecar] = error;
    j[vocab::kDumpPath.sidecar] = dump_file;
    j[vocab::kFormat.sidecar] = format;
    if (compression) j[vocab::kCompression.sidecar] = *compression;
    if (dump_level) j[vocab::kDumpLevel.sidecar] = *dump_level;
    if (zero_pages) j[vocab::kZeroPages.sidecar] = *zero_pages;
    if (recipients) {
        j[vocab::kEncrypted.sidecar] = true;
        j[vocab::kRecipients.sidecar] = recipients;
    }
    if (live) j[vocab::kLive.sidecar] = *live;
    if (pause_usec) j[vocab::kPauseUsec.sidecar] = *pause_usec;
    if (live_rounds) j[vocab::kLiveRounds.sidecar] = *live_rounds;
    if (pages_recopied) j[vocab::kPagesRecopied.sidecar] = *pages_recopied;
    if (live_restarts) j[vocab::kLiveRestarts.sidecar] = *live_restarts;
    if (guest_log) {
        nlohmann::ordered_json g = nlohmann::ordered_json::object();
        if (guest_log->records) {
            g["records"] = *guest_log->records;
            g["partial"] = guest_log->partial;
            if (!guest_log->damage.empty()) g["damage"] = guest_log->damage;
        }
        if (!guest_log->dmesg_file.empty()) g["dmesg_file"] = guest_log->dmesg_file;
        if (!guest_log->error.empty()) g["error"] = guest_log->error;
        j["guest_log"] = g;
        j[vocab::kGuestPanic.sidecar] = guest_panic ? nlohmann::ordered_json(*guest_panic) : nlohmann::ordered_json(nullptr);
        if (guest_backtrace) {
            nlohmann::ordered_json b;
            b["vcpu"] = guest_backtrace->vcpu;
            b["method"] = guest_backtrace->method;
            b["frames"] = guest_backtrace->frames;
            if (!guest_backtrace->stopped.empty()) b["stopped"] = guest_backtrace->stopped;
            j[vocab::kGuestBacktrace.sidecar] = b;
        }
        if (auto signature = crash_signature(guest_panic, guest_backtrace)) j[vocab::kCrashSignature.sidecar] = *signature;
    }
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Sidecar Sidecar::from_json(const std::string& text, const std::string& origin) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw Error("not a JSON object", origin);
    Sidecar s;
    try {
        s.domain_name = j.value(vocab::kDomainName.sidecar, "");
        if (j.contains("domain_bytes")) s.domain_name = from_hex(j["domain_bytes"].get<std::string>());
        s.domid = j.value(vocab::kDomid.sidecar, uint32_t{0});
        s.uuid = j.value(vocab::kUuid.sidecar, "");
        s.type = j.value(vocab::kGuestType.sidecar, "");
        s.reason = j.value(vocab::kReason.sidecar, "");
        s.start_time = j.value("start_time", int64_t{0});
        s.end_time = j.value("end_time", int64_t{0});
        s.pages = j.value(vocab::kPages.sidecar, uint64_t{0});
        s.file_size = j.value("file_size", uint64_t{0});
        s.bytes_on_disk = j.value(vocab::kSizeOnDisk.sidecar, uint64_t{0});
        s.digests = j.value(vocab::kDigests.sidecar, "");
        s.result = outcome_from_string(j.value(vocab::kResult.sidecar, "failed"));
        s.error = j.value(vocab::kError.sidecar, "");
        s.dump_file = j.value(vocab::kDumpPath.sidecar, "");
        s.format = j.value(vocab::kFormat.sidecar, "v1");
        if (j.contains(vocab::kCompression.sidecar)) s.compression = j[vocab::kCompression.sidecar].get<std::string>();
        if (j.contains(vocab::kDumpLevel.sidecar)) s.dump_level = j[vocab::kDumpLevel.sidecar].get<unsigned>();
        if (j.contains(vocab::kZeroPages.sidecar)) s.zero_pages = j[vocab::kZeroPages.sidecar].get<uint64_t>();
        if (j.value(vocab::kEncrypted.sidecar, false)) s.recipients = j.value(vocab::kRecipients.sidecar, 1u);
        if (j.contains(vocab::kLive.sidecar)) s.live = j[vocab::kLive.sidecar].get<std::string>();
        if (j.contains(vocab::kPauseUsec.sidecar)) s.pause_usec = j[vocab::kPauseUsec.sidecar].get<uint64_t>();
        if (j.contains(vocab::kLiveRounds.sidecar)) s.live_rounds = j[vocab::kLiveRounds.sidecar].get<unsigned>();
        if (j.contains(vocab::kPagesRecopied.sidecar))
            s.pages_recopied = j[vocab::kPagesRecopied.sidecar].get<uint64_t>();
        if (j.contains(vocab::kLiveRestarts.sidecar))
            s.live_restarts = j[vocab::kLiveRestarts.sidecar].get<unsigned>();
        if (j.contains("guest_log") && j["guest_log"].is_object()) {
            const auto& g = j["guest_log"];
            GuestLog log;
            if (g.contains("records")) log.records = g["records"].get<uint64_t>();
            log.partial = g.value("partial", false);
            log.damage = g.value("damage", std::vector<std::string>{});
            log.dmesg_file = g.value("dmesg_file", "");
            log.error = g.value("error", "");
            s.guest_log = std::move(log);
        }
        if (j.contains(vocab::kGuestPanic.sidecar) && j[vocab::kGuestPanic.sidecar].is_string()) s.guest_panic = j[vocab::kGuestPanic.sidecar].get<std::string>();
        if (j.contains(vocab::kGuestBacktrace.sidecar) && j[vocab::kGuestBacktrace.sidecar].is_object()) {
            const auto& b = j[vocab::kGuestBacktrace.sidecar];
            GuestBacktrace bt;
            bt.vcpu = b.value("vcpu", uint32_t{0});
            bt.method = b.value("method", "");
            bt.frames = b.value("frames", std::vector<std::string>{});
            bt.stopped = b.value("stopped", "");
            s.guest_backtrace = std::move(bt);
        }
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("bad sidecar field: ") + e.what(), origin);
    } catch (const Error& e) {
        throw e.with_object(origin);
    }
    return s;
}

std::filesystem::path sidecar_path(const std::filesystem::path& dump_path) {
    return std::filesystem::path(dump_path.string() + ".json");
}

std::filesystem::path dmesg_path(const std::filesystem::path& dump_path) {
    const std::string dump = dump_path.string();
    constexpr std::string_view kAge = ".age";
    if (dump.ends_with(kAge)) return dump.substr(0, dump.size() - kAge.size()) + ".dmesg.txt.age";
    return std::filesystem::path(dump + ".dmesg.txt");
}

void write_file_atomically(const std::filesystem::path& path, std::string_view text, unsigned mode) {
    AtomicFile file(path, mode);
    util::write_all(file.fd(), text.data(), text.size(), path.string());
    file.commit();
}

void replace_file_atomically(const std::filesystem::path& path, std::string_view text, unsigned mode) {
    // AtomicFile refuses to replace, so write a fresh name and rename over.
    const std::filesystem::path tmp = path.string() + ".new";
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    write_file_atomically(tmp, text, mode);
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno("cannot replace", path.string());
}

std::string_view without_log_time(std::string_view panic) {
    if (panic.starts_with('[')) {
        if (auto end = panic.find("] "); end != std::string_view::npos) panic.remove_prefix(end + 2);
    }
    return panic;
}

void write_sidecar(const std::filesystem::path& path, const Sidecar& s) {
    write_file_atomically(path, s.to_json(), 0600);
}

Sidecar read_sidecar(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) throw Error("cannot read sidecar", path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    return Sidecar::from_json(ss.str(), path.string());
}

}  // namespace xendump::daemon
