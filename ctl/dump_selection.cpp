#include "dump_selection.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <map>
#include <set>

#include "crash_signature.hpp"
#include "time_spec.hpp"
#include "util/vocabulary.hpp"
#include "xendump/error.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

namespace fs = std::filesystem;

const char* const kSelectionHelp =
    "MATCH selects dumps of the dump directory: a domain NAME, a DOMID, a UUID,\n"
    "a dump's file name (NAME.core), a PATH, or FIELD=VALUE (DOMAIN, DOMID, UUID,\n"
    "TYPE, REASON, RESULT, DIGESTS, FILE, PATH from the sidecar; SIGNATURE, the\n"
    "crash's, from its panic line; HOST, the host of a dump in the store, with\n"
    "list --store; KERNEL, TIME, WRITER and the other keys of the dump's domain\n"
    "note). Matches of one field are alternatives; matches of different fields\n"
    "must all hold. A FILE may be s3://BUCKET/KEY, an object in S3-compatible\n"
    "storage, read by ranged GETs (credentials and endpoint: AWS_ACCESS_KEY_ID,\n"
    "AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION or ~/.aws/credentials).\n";

namespace {

std::string upper(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

bool is_field_name(std::string_view s) {
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool is_uuid(std::string_view s) {
    if (s.size() != 36) return false;
    for (size_t i = 0; i < s.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    }
    return true;
}

bool all_digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// Fields whose values are compared without regard to case.
bool case_blind(const std::string& field) {
    static const std::set<std::string> kFields = {"UUID", "TYPE", "REASON", "RESULT", "DIGESTS", "SIGNATURE"};
    return kFields.contains(field);
}

std::string canonical(const fs::path& p) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(fs::absolute(p), ec);
    return ec ? p.lexically_normal().string() : c.string();
}

bool equal_values(const std::string& field, const std::string& a, const std::string& b) {
    if (field == "PATH") return canonical(a) == canonical(b);
    if (field == "DOMID") {
        // "07" and "7" name one domain.
        unsigned long long x = 0, y = 0;
        auto rx = std::from_chars(a.data(), a.data() + a.size(), x);
        auto ry = std::from_chars(b.data(), b.data() + b.size(), y);
        if (rx.ec == std::errc() && ry.ec == std::errc() && rx.ptr == a.data() + a.size() &&
            ry.ptr == b.data() + b.size())
            return x == y;
    }
    return case_blind(field) ? upper(a) == upper(b) : a == b;
}

std::optional<std::string> note_field(const daemon::DumpEntry& e, const std::string& key) {
    if (!is_present(e)) return std::nullopt;
    try {
        const DumpReader r = DumpReader::open(e.dump);
        return r.domain().get(key);
    } catch (const Error&) {
        return std::nullopt;  // not a dump we can read: it has no such field
    }
}

}  // namespace

Match classify_match(const std::string& operand) {
    std::error_code ec;
    if (operand.find('/') != std::string::npos ||
        fs::symlink_status(operand, ec).type() != fs::file_type::not_found)
        return {"PATH", operand};
    if (auto eq = operand.find('='); eq != std::string::npos) {
        const std::string field = operand.substr(0, eq);
        if (!is_field_name(field))
            throw Error("not a MATCH: '" + operand + "' (FIELD=VALUE needs a FIELD of letters, digits and '_')");
        std::string f = upper(field);
        if (f == "NAME") f = "DOMAIN";
        return {f, operand.substr(eq + 1)};
    }
    if (operand.ends_with(".core")) return {"FILE", operand};
    if (all_digits(operand)) return {"DOMID", operand};
    if (is_uuid(operand)) return {"UUID", operand};
    return {"DOMAIN", operand};
}

std::string selection_from_args(const ParsedArgs& p, int64_t now, Selection& out) {
    try {
        for (const auto& o : p.operands) out.matches.push_back(classify_match(o));
        // --file FILE: a FILE operand by name, whatever it looks like.
        for (const auto& f : p.values("--file")) out.matches.push_back({"PATH", f});
        // Read as list and info show times: local time, or UTC with --utc.
        out.utc = p.has("--utc");
        const Zone zone = out.utc ? Zone::utc : Zone::local;
        if (auto v = p.value("-S", "--since")) out.since = parse_time_spec(*v, now, zone);
        if (auto v = p.value("-U", "--until")) out.until = parse_time_spec(*v, now, zone);
    } catch (const Error& e) {
        return e.what();
    }
    out.reverse = p.has("--reverse");  // -r too where it is --reverse (not dump: its --recipient)
    if (p.has("-1")) out.latest = 1;
    if (auto v = p.value("-n")) {
        size_t n = 0;
        auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
        if (ec != std::errc() || ptr != v->data() + v->size() || n == 0)
            return "-n needs a positive number, not '" + *v + "'";
        if (p.has("-1")) return "-1 and -n exclude each other";
        out.latest = n;
    }
    out.any_option = out.since || out.until || out.latest || out.reverse;
    return {};
}

bool only_paths(const Selection& s) {
    return !s.matches.empty() &&
           std::all_of(s.matches.begin(), s.matches.end(), [](const Match& m) { return m.field == "PATH"; });
}

bool is_present(const daemon::DumpEntry& e) {
    if (e.in_store) return *e.in_store;
    std::error_code ec;
    return fs::exists(e.dump, ec);
}

bool is_missing(const daemon::DumpEntry& e) {
    return e.info && e.info->result == daemon::DumpOutcome::ok && !is_present(e);
}

std::optional<std::string> dump_field(const daemon::DumpEntry& e, const std::string& field) {
    if (field == "PATH") return e.dump.string();
    if (field == "FILE") return e.dump.filename().string();
    // The host of a store's dump (list --store); a directory's have none.
    if (field == "HOST") return e.host.empty() ? std::nullopt : std::optional<std::string>(e.host);
    if (e.info) {
        const daemon::Sidecar& s = *e.info;
        if (field == "DOMAIN") return s.domain_name;
        if (field == "DOMID") return std::to_string(s.domid);
        if (field == "UUID" && !s.uuid.empty()) return s.uuid;
        if (field == "TYPE" && !s.type.empty()) return s.type;
        if (field == "REASON" && !s.reason.empty()) return s.reason;
        if (field == "RESULT") return is_missing(e) ? "missing" : daemon::to_string(s.result);
        if (field == "DIGESTS" && !s.digests.empty()) return s.digests;
        if (field == vocab::kCrashSignature.match) return daemon::crash_signature(s);
    } else if (field == "RESULT") {
        return std::nullopt;  // a dump without a sidecar: its result was never recorded
    }
    return note_field(e, field == "DOMAIN" ? keys::kName : field);
}

std::vector<daemon::DumpEntry> select_dumps(const std::vector<daemon::DumpEntry>& entries, const Selection& s) {
    // Matches grouped by field: one of each group must hold.
    std::map<std::string, std::vector<std::string>> groups;
    for (const auto& m : s.matches) groups[m.field].push_back(m.value);
    std::vector<daemon::DumpEntry> out;
    for (const auto& e : entries) {
        if (s.since && e.time < *s.since) continue;
        if (s.until && e.time > *s.until) continue;
        bool ok = true;
        for (const auto& [field, values] : groups) {
            const auto v = dump_field(e, field);
            const auto& name = field;  // clang 14 cannot capture a structured binding
            ok = v && std::any_of(values.begin(), values.end(),
                                  [&](const std::string& want) { return equal_values(name, *v, want); });
            if (!ok) break;
        }
        if (ok) out.push_back(e);
    }
    // scan_dump_dir sorts by time; equal times keep their order.
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
    if (s.latest && out.size() > *s.latest) out.erase(out.begin(), out.end() - static_cast<ptrdiff_t>(*s.latest));
    if (s.reverse) std::reverse(out.begin(), out.end());
    return out;
}

Targets resolve_targets(ServiceArgs& sa, const Selection& s, bool all) {
    Targets t;
    if (only_paths(s)) {
        for (const auto& m : s.matches) t.files.emplace_back(m.value);
        return t;
    }
    load_service_config(sa);
    const fs::path& dir = sa.config.dump_dir;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error("not a directory (the dump directory; see --dump-dir)", dir.string());
    Selection newest_last = s;
    newest_last.reverse = false;
    const auto picked = select_dumps(daemon::scan_dump_dir(dir), newest_last);
    for (const auto& e : picked) {
        if (is_present(e)) t.files.push_back(e.dump);
        else if (is_missing(e)) t.missing.push_back(e.dump);
    }
    if (!all && t.files.size() > 1) t.files.erase(t.files.begin(), t.files.end() - 1);
    if (s.reverse) std::reverse(t.files.begin(), t.files.end());
    if (t.files.empty() && t.missing.empty()) {
        std::string what;
        for (const auto& m : s.matches) what += (what.empty() ? "" : " ") + m.field + "=" + m.value;
        throw Error(picked.empty() ? "no dump matches" + (what.empty() ? std::string() : " " + what)
                                   : "the dumps that match have no dump file (refused, failed or cancelled)",
                    dir.string());
    }
    return t;
}

}  // namespace xendump::ctl
