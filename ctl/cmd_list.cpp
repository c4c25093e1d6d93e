// xen-dumpctl list [--json[=short|pretty]] [MATCH...]: the dumps in the dump directory,
// oldest first, from their sidecars (like coredumpctl list): time, domain,
// reason, size, result, how the file was written (format, compression, dump
// level: the sidecar's, else the file's own headers), and the guest's panic
// line when its log had one (issue 20: the sidecar's guest_panic, from the
// log saved as DUMP.dmesg.txt), and whether the dump is encrypted (FORMAT
// "+age"; --json "encrypted", "recipients": its age header, no key needed).
// Refused and failed dumps appear too; they have no file; a dump whose sidecar
// records it but whose file is gone shows MISSING. MATCH and the selection
// options: dump_selection.hpp. Text from the sidecars is escaped for the
// terminal (escape_text).
#include <cstdio>
#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "table.hpp"
#include "commands.hpp"
#include "encrypted.hpp"
#include "dump_dir.hpp"
#include "dump_selection.hpp"
#include "options.hpp"
#include "service_options.hpp"
#include "store_dumps.hpp"
#include "time_spec.hpp"
#include "util/util.hpp"
#include "util/vocabulary.hpp"
#include "crash_signature.hpp"
#include "written_as.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"
#include "xendump/text.hpp"

namespace xendump::ctl {

namespace {

// -F FIELD: each value FIELD takes in the selected dumps, once, in the order
// first seen (coredumpctl -F). Dumps without the field print nothing.
int print_field(const std::vector<daemon::DumpEntry>& entries, const std::string& field) {
    std::vector<std::string> seen;
    for (const auto& e : entries) {
        const auto v = dump_field(e, field);
        if (!v || std::find(seen.begin(), seen.end(), *v) != seen.end()) continue;
        seen.push_back(*v);
        std::printf("%s\n", escape_text(*v).c_str());
    }
    return seen.empty() ? cli::kExitFailure : cli::kExitOk;
}

// "matching " when the command line selected, for "No %sdumps in DIR."
const char* matching(const Selection& sel) { return sel.matches.empty() && !sel.any_option ? "" : "matching "; }

// --group-by FIELD: the selected dumps that have FIELD, grouped by its value
// in the order first seen (with SIGNATURE=, one group a crash): how many,
// the first and the last start time, the domains, the latest panic line.
struct Group {
    std::string value;
    size_t count = 0;
    int64_t first = 0, last = 0;
    std::vector<std::string> domains;
    std::vector<std::string> hosts;  // a store's dumps (list --store)
    std::optional<std::string> panic;
};

void add_once(std::vector<std::string>& to, const std::string& value) {
    if (std::find(to.begin(), to.end(), value) == to.end()) to.push_back(value);
}

std::vector<Group> groups_of(const std::vector<daemon::DumpEntry>& entries, const std::string& field) {
    std::vector<Group> groups;
    for (const auto& e : entries) {
        const auto v = dump_field(e, field);
        if (!v) continue;
        auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.value == *v; });
        if (g == groups.end()) {
            g = groups.insert(groups.end(), Group{*v, 0, e.time, e.time, {}, {}, std::nullopt});
        }
        ++g->count;
        g->first = std::min(g->first, e.time);
        g->last = std::max(g->last, e.time);
        if (!e.host.empty()) add_once(g->hosts, e.host);
        if (e.info) {
            add_once(g->domains, e.info->domain_name);
            if (e.info->guest_panic && e.time >= g->last) g->panic = e.info->guest_panic;
        }
    }
    return groups;
}

// The panic line for the table: without its "[seconds.micros] " time,
// escaped (as dmesg printed it, whichever version wrote the sidecar), cut to
// kPanicWidth bytes ("-" when the guest's log had none).
std::string panic_column(const std::optional<std::string>& panic) {
    constexpr size_t kPanicWidth = 60;
    if (!panic) return "-";
    std::string out = reescape_text(daemon::without_log_time(*panic));
    if (out.size() > kPanicWidth) out = out.substr(0, kPanicWidth - 3) + "...";
    return out;
}

// Whether a dump's file is here to open for what its sidecar does not say:
// a store's dumps are listed from their sidecars alone (one GET each).
bool is_local(const daemon::DumpEntry& e) { return !e.in_store && is_present(e); }

// How a dump was written: its sidecar says (format, and a compact file's
// compression and dump level); a file without one (written by another tool,
// or its sidecar unreadable) says in its own headers. Nothing when neither
// can (no sidecar and no file a reader opens).
std::optional<WrittenAs> written_as(const daemon::DumpEntry& e) {
    if (e.info) return WrittenAs{e.info->format, e.info->compression, e.info->dump_level};
    if (!is_local(e)) return std::nullopt;
    try {
        return ctl::written_as(DumpReader::open(e.dump));
    } catch (const Error&) {
        return std::nullopt;  // not a dump a reader opens: the columns say "-"
    }
}

// A compact dump's zero pages (written_as.hpp): the sidecar's, else the
// file's when it has one; null for v1 files and when nothing says.
std::optional<uint64_t> zero_pages(const daemon::DumpEntry& e) {
    if (e.info && e.info->zero_pages) return e.info->zero_pages;
    if (!is_local(e) || (e.info && e.info->format != "kdump")) return std::nullopt;
    try {
        return DumpReader::open(e.dump).zero_pages();
    } catch (const Error&) {
        return std::nullopt;
    }
}

// Whether a dump is encrypted and to how many recipients (its age header,
// read without a key; a file gone: its name's .age; a store's dump: its
// name and its sidecar). recipients is nullopt when the header cannot be read.
struct Encrypted {
    bool encrypted = false;
    std::optional<size_t> recipients;
};
Encrypted encrypted(const daemon::DumpEntry& e) {
    Encrypted out;
    out.encrypted = has_age_suffix(e.dump);
    if (e.in_store) {
        if (e.info && e.info->recipients) out.recipients = e.info->recipients;
        return out;
    }
    if (!is_present(e)) return out;
    try {
        if (const auto info = encryption_of(e.dump)) {
            out.encrypted = true;
            out.recipients = info->recipient_types.size();
        }
    } catch (const Error&) {
        // A damaged header: still encrypted by its name (verify says what is wrong).
    }
    return out;
}

// Values for a column: escaped, joined by commas.
std::string joined(const std::vector<std::string>& values) {
    std::string out;
    for (const auto& v : values) out += (out.empty() ? "" : ",") + escape_text(v);
    return out;
}

template <class T>
nlohmann::ordered_json or_null(const std::optional<T>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

int cmd_list(Invocation& c) {
    const ServiceArgs& sa = c.service;
    const Selection& sel = c.selection;
    // --store s3://BUCKET/PREFIX: a fleet's dumps, with their hosts.
    const std::optional<std::string> store = c.p.value("--store");
    const std::string where = store ? *store : sa.config.dump_dir.string();
    auto entries = select_dumps(store ? scan_store(*store) : daemon::scan_dump_dir(sa.config.dump_dir), sel);
    // As coredumpctl: exit status 1 when nothing is listed.
    const int status = entries.empty() ? cli::kExitFailure : cli::kExitOk;
    if (auto field = c.p.value("-F", "--field")) {
        std::string name;
        try {
            name = classify_match(*field + "=").field;  // checked and upper-cased as in FIELD=VALUE
        } catch (const Error& e) {
            return c.usage("-F: " + std::string(e.what()));
        }
        return print_field(entries, name);
    }
    if (auto by = c.p.value("--group-by")) {
        std::string name;
        try {
            name = classify_match(*by + "=").field;
        } catch (const Error& e) {
            return c.usage("--group-by: " + std::string(e.what()));
        }
        const std::vector<Group> groups = groups_of(entries, name);
        const Zone zone = sel.utc ? Zone::utc : Zone::local;
        if (c.json) {
            nlohmann::ordered_json out = nlohmann::ordered_json::array();
            for (const auto& g : groups) {
                nlohmann::ordered_json j;
                j["field"] = name;
                j["value"] = g.value;
                j["count"] = g.count;
                j["first_time"] = g.first;  // unix seconds, as the sidecar's start_time
                j["last_time"] = g.last;
                j["domains"] = g.domains;
                if (store) j["hosts"] = g.hosts;
                j[vocab::kGuestPanic.json] = or_null(g.panic);
                out.push_back(j);
            }
            print_json(out, c.json);
            return groups.empty() ? cli::kExitFailure : cli::kExitOk;
        }
        if (groups.empty()) {
            std::fprintf(stderr, "No %sdump has %s in %s.\n", matching(sel), name.c_str(), escape_text(where).c_str());
            return cli::kExitFailure;
        }
        std::vector<cli::Table::Column> columns{{name.c_str()}, {"COUNT", true}, {"FIRST"}, {"LAST"}, {"DOMAINS"}};
        if (store) columns.push_back(cli::Table::Column{"HOSTS"});
        columns.push_back({"PANIC", false, true});
        cli::Table table(columns);
        for (const auto& g : groups) {
            std::vector<std::string> row{escape_text(g.value), std::to_string(g.count), shown_time(g.first, zone),
                                         shown_time(g.last, zone), joined(g.domains)};
            if (store) row.push_back(joined(g.hosts));
            row.push_back(panic_column(g.panic));
            table.add_row(row);
        }
        table.print(!c.p.has("--no-legend"));
        return cli::kExitOk;
    }
    if (c.json) {
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        for (const auto& e : entries) {
            nlohmann::ordered_json j;
            const auto written = written_as(e);
            j[vocab::kDumpPath.json] = e.dump.string();
            if (store) j["host"] = e.host;
            j["present"] = is_present(e);
            j["missing"] = is_missing(e);
            j["time"] = e.time;
            j[vocab::kSizeOnDisk.json] = e.bytes_on_disk;
            if (e.info) {
                j[vocab::kDomainName.json] = e.info->domain_name;
                j[vocab::kDomid.json] = e.info->domid;
                j[vocab::kUuid.json] = e.info->uuid;
                j[vocab::kGuestType.json] = e.info->type;
                j[vocab::kReason.json] = e.info->reason;
                j[vocab::kResult.json] = daemon::to_string(e.info->result);
                j[vocab::kPages.json] = e.info->pages;
                j[vocab::kDigests.json] = e.info->digests;
                j[vocab::kError.json] = e.info->error;
                j[vocab::kGuestPanic.json] = e.info->guest_panic ? nlohmann::ordered_json(*e.info->guest_panic) : nullptr;
                j[vocab::kCrashSignature.json] = or_null(daemon::crash_signature(*e.info));
                const bool saved = e.info->guest_log && !e.info->guest_log->dmesg_file.empty();
                j[vocab::kDmesgPath.json] = saved ? nlohmann::ordered_json(daemon::dmesg_path(e.dump).string()) : nullptr;
            } else {
                j[vocab::kResult.json] = nullptr;
                j["sidecar_error"] = e.sidecar_error.empty() ? "no sidecar" : e.sidecar_error;
            }
            j[vocab::kFormat.json] = written ? nlohmann::ordered_json(written->format) : nullptr;
            j[vocab::kCompression.json] = written ? or_null(written->compression) : nullptr;
            j[vocab::kDumpLevel.json] = written ? or_null(written->dump_level) : nullptr;
            j[vocab::kZeroPages.json] = or_null(zero_pages(e));
            const Encrypted enc = encrypted(e);
            j["encrypted"] = enc.encrypted;
            j["recipients"] = or_null(enc.recipients);
            out.push_back(j);
        }
        print_json(out, c.json);
        return status;
    }
    if (entries.empty()) {
        std::fprintf(stderr, "No %sdumps in %s.\n", matching(sel), escape_text(where).c_str());
        return status;
    }
    // Columns as wide as their widest cell; on a terminal PANIC, last, is cut
    // to what the others leave (--json has it whole). A store's dumps: HOST after TIME.
    std::vector<cli::Table::Column> columns{{"TIME"},   {"DOMAIN"}, {"ID", true}, {"REASON"},         {"SIZE", true},
                                            {"RESULT"}, {"FORMAT"}, {"FILE"},     {"PANIC", false, true}};
    if (store) columns.insert(columns.begin() + 1, cli::Table::Column{"HOST"});
    cli::Table table(columns);
    for (const auto& e : entries) {
        const auto written = written_as(e);
        // An encrypted dump: "+age" (alone when nothing else says how it was written).
        const bool enc = encrypted(e).encrypted;
        // Guest names, file names and guest log text may hold anything: escaped (escape_text).
        std::vector<std::string> row{shown_time(e.time, sel.utc ? Zone::utc : Zone::local)};
        if (store) row.push_back(escape_text(e.host));
        row.insert(row.end(),
                   {e.info ? escape_text(e.info->domain_name) : "-",
                    e.info ? std::to_string(e.info->domid) : "-",
                    e.info ? escape_text(e.info->reason) : "-",
                    cli::human_bytes(e.bytes_on_disk),
                    is_missing(e) ? "MISSING" : e.info ? daemon::to_string(e.info->result) : "unknown",
                    written ? format_column(*written) + (enc ? "+age" : "") : enc ? "age" : "-",
                    escape_text(is_present(e) || is_missing(e) ? e.dump.filename().string() : "(none)"),
                    panic_column(e.info ? e.info->guest_panic : std::nullopt)});
        table.add_row(row);
    }
    table.print(!c.p.has("--no-legend"));
    return cli::kExitOk;
}

}  // namespace xendump::ctl
