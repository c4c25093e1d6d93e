#include "config.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "cli.hpp"
#include "xendump/error.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/recipients.hpp"
#include "xendump/s3.hpp"
#include "xendump/writer.hpp"
#include "xendump_config.h"

namespace xendump::daemon {

namespace {

std::string trim(const std::string& s) {
    const char* ws = " \t\r";
    auto b = s.find_first_not_of(ws);
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

using Setter = std::function<void(Config&, const std::string&)>;

const std::map<std::string, Setter>& setters() {
    static const std::map<std::string, Setter> table = {
        {"DumpDir", [](Config& c, const std::string& v) {
             if (v.empty() || v.front() != '/') throw Error("DumpDir must be an absolute path");
             c.dump_dir = v;
         }},
        {"Host", [](Config& c, const std::string& v) {
             if (!v.empty() && v != "xen" && !v.starts_with("sim:"))
                 throw Error("Host must be \"xen\" or \"sim:DIR\"");
             c.host = v;
         }},
        {"ControlSocket", [](Config& c, const std::string& v) {
             if (v.empty() || v.front() != '/') throw Error("ControlSocket must be an absolute path");
             c.control_socket = v;
         }},
        {"ControlGroup", [](Config& c, const std::string& v) { c.control_group = v; }},
        {"OnCrash", [](Config& c, const std::string& v) {
             if (v == "preserve") c.on_crash = OnCrash::preserve;
             else if (v == "destroy") c.on_crash = OnCrash::destroy;
             else throw Error("OnCrash must be \"preserve\" or \"destroy\": \"" + v + "\"");
         }},
        {"MaxParallel", [](Config& c, const std::string& v) {
             unsigned n = parse_unsigned(v, 64);
             if (n == 0) throw Error("MaxParallel must be at least 1");
             c.max_parallel = n;
         }},
        {"MaxUse", [](Config& c, const std::string& v) {
             if (v.empty() || v == "infinity") c.max_use.reset();
             else c.max_use = parse_size_limit(v);
         }},
        {"KeepFree", [](Config& c, const std::string& v) {
             if (v.empty() || v == "0") c.keep_free.reset();
             else c.keep_free = parse_size_limit(v);
         }},
        {"KeepPerDomain", [](Config& c, const std::string& v) { c.keep_per_domain = parse_unsigned(v, 1000000); }},
        {"MaxAge", [](Config& c, const std::string& v) { c.max_age = parse_duration(v); }},
        {"MinInterval", [](Config& c, const std::string& v) { c.min_interval = parse_duration(v); }},
        {"Digests", [](Config& c, const std::string& v) { c.digests = parse_bool(v); }},
        {"Live", [](Config& c, const std::string& v) {
             if (v.empty() || v == "no") c.live = LiveDefault::no;
             else if (v == "consistent") c.live = LiveDefault::consistent;
             else if (v == "inconsistent") c.live = LiveDefault::inconsistent;
             else throw Error("Live must be \"no\", \"consistent\" or \"inconsistent\": \"" + v + "\"");
         }},
        {"MaxPause", [](Config& c, const std::string& v) {
             std::string_view ms = v;
             if (ms.ends_with("ms")) ms.remove_suffix(2);
             const unsigned n = v.empty() ? 100 : parse_unsigned(ms, 60000);
             if (n == 0) throw Error("MaxPause must be from 1 to 60000 (milliseconds): \"" + v + "\"");
             c.max_pause = std::chrono::milliseconds(n);
         }},
        {"LiveRounds", [](Config& c, const std::string& v) { c.live_rounds = v.empty() ? 5 : parse_unsigned(v, 100); }},
        {"Threads", [](Config& c, const std::string& v) {
             c.threads = v.empty() ? 0 : parse_unsigned(v, kMaxWriteThreads);
             if (!v.empty() && c.threads == 0)
                 throw Error("Threads must be from 1 to " + std::to_string(kMaxWriteThreads) +
                             ", or empty for the number of cores");
         }},
    };
    return table;
}

// The keys of [Upload] (xen-dumpd.conf(5), UPLOAD). Credentials are never
// among them: they come from where the AWS tools read them (xendump/s3.hpp).
const std::map<std::string, Setter>& upload_setters() {
    static const std::map<std::string, Setter> table = {
        {"Target", [](Config& c, const std::string& v) {
             UploadConfig& u = c.upload;
             if (v.empty()) {
                 u.bucket.clear();
                 u.prefix.clear();
                 return;
             }
             if (!s3::is_url(v)) throw Error("Target must be s3://BUCKET/PREFIX: \"" + v + "\"");
             const s3::Url url = s3::parse_url(v);
             std::string prefix = url.key;
             while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
             if (prefix.starts_with('/') || prefix.find("//") != std::string::npos)
                 throw Error("Target's PREFIX cannot hold an empty path segment: \"" + v + "\"");
             u.bucket = url.bucket;
             u.prefix = prefix;
         }},
        {"Endpoint", [](Config& c, const std::string& v) {
             if (!v.empty() && !v.starts_with("https://") && !v.starts_with("http://"))
                 throw Error("Endpoint must start with https:// (or http:// for a store without TLS): \"" + v + "\"");
             if (v.find_first_of(" \t?#") != std::string::npos) throw Error("Endpoint is not a URL: \"" + v + "\"");
             c.upload.endpoint = v;
         }},
        {"Region", [](Config& c, const std::string& v) {
             for (char ch : v)
                 if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_'))
                     throw Error("Region must be a region name such as us-east-1: \"" + v + "\"");
             c.upload.region = v;
         }},
        {"Mode", [](Config& c, const std::string& v) {
             if (v.empty() || v == "spool") c.upload.mode = UploadMode::spool;
             else if (v == "stream") c.upload.mode = UploadMode::stream;
             else throw Error("Mode must be \"spool\" or \"stream\": \"" + v + "\"");
         }},
        {"KeepLocal", [](Config& c, const std::string& v) { c.upload.keep_local = parse_bool(v); }},
        {"PartSize", [](Config& c, const std::string& v) {
             if (v.empty()) {
                 c.upload.part_size = uint64_t{16} << 20;
                 return;
             }
             const uint64_t n = parse_bytes(v);
             if (n < (uint64_t{5} << 20) || n > (uint64_t{5} << 30))
                 throw Error("PartSize must be from 5M to 5G (S3's limits on a part): \"" + v + "\"");
             c.upload.part_size = n;
         }},
        {"PartsInFlight", [](Config& c, const std::string& v) {
             if (v.empty()) {
                 c.upload.in_flight = UploadConfig{}.in_flight;
                 return;
             }
             const unsigned n = parse_unsigned(v, 16);
             if (n == 0) throw Error("PartsInFlight must be at least 1");
             c.upload.in_flight = n;
         }},
    };
    return table;
}

// A configuration file must be a regular file (or a link to one): a directory
// opens and reads as empty, which would silently mean "all defaults".
std::string read_file(const std::filesystem::path& path) {
    std::error_code ec;
    auto status = std::filesystem::status(path, ec);
    if (ec) throw Error("cannot read configuration file: " + ec.message(), path.string());
    if (!std::filesystem::is_regular_file(status))
        throw Error(std::string("not a configuration file: ") +
                        (std::filesystem::is_directory(status) ? "a directory" : "not a regular file"),
                    path.string());
    std::ifstream in(path);
    if (!in) throw Error("cannot read configuration file", path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw Error("cannot read configuration file", path.string());
    return ss.str();
}

}  // namespace

Config Config::defaults() {
    Config c;
    c.dump_dir = XENDUMP_DEFAULT_DUMP_DIR;
    c.control_socket = XENDUMP_DEFAULT_CONTROL_SOCKET;
    c.keep_free = SizeLimit{0, 5, true};
    return c;
}

std::filesystem::path drop_in_dir(const std::filesystem::path& main_file) {
    return std::filesystem::path(main_file.string() + ".d");
}

std::filesystem::path default_config_file() {
    return std::filesystem::path(XENDUMP_SYSCONFDIR) / "xen-dumpd.conf";
}

namespace {

// The keys of [Dump] that a [Domain NAME] section may hold too: into the
// section's DumpFormatKeys.
using FormatSetter = std::function<void(DumpFormatKeys&, const std::string&)>;

const std::map<std::string, FormatSetter>& format_setters() {
    static const std::map<std::string, FormatSetter> table = {
        {"Format", [](DumpFormatKeys& k, const std::string& v) {
             if (v.empty()) k.kdump.reset();
             else if (v == "v1" || v == "kdump") k.kdump = v == "kdump";
             else throw Error("Format must be \"v1\" or \"kdump\": \"" + v + "\"");
         }},
        {"Compress", [](DumpFormatKeys& k, const std::string& v) {
             if (v.empty()) k.compression.reset();
             else k.compression = compression_from_string(v);
         }},
        {"DumpLevel", [](DumpFormatKeys& k, const std::string& v) {
             if (v.empty()) {
                 k.dump_level.reset();
                 return;
             }
             try {
                 k.dump_level = parse_unsigned(v, kernel::kMaxDumpLevel);
             } catch (const Error&) {
                 throw Error("DumpLevel must be a number from 0 to 31 (makedumpfile -d): \"" + v + "\"");
             }
         }},
    };
    return table;
}

// Recipient= (one recipient, as age -r takes it) and RecipientsFile= (an
// absolute path, read now as age -R reads it: its errors name FILE:LINE)
// add to the section's list; an empty value empties it. Either way the
// section has a list of its own from then on.
bool set_recipient_key(DumpFormatKeys& keys, const std::string& key, const std::string& value) {
    if (key != "Recipient" && key != "RecipientsFile") return false;
    std::vector<std::string>& list = keys.recipients.emplace(keys.recipients.value_or(std::vector<std::string>{}));
    if (value.empty()) {
        list.clear();
    } else if (key == "Recipient") {
        list.push_back(parse_recipient(value));
    } else {
        if (value.front() != '/') throw Error("RecipientsFile must be an absolute path");
        try {
            for (std::string& r : read_recipients_file(value)) list.push_back(std::move(r));
        } catch (const Error& e) {
            throw Error(e.what());  // FILE:LINE of the recipients file, after the configuration's
        }
    }
    return true;
}

// ClearMetadata=: "panic", "backtrace", both (separated by spaces or
// commas), or empty for none.
ClearMetadata parse_clear_metadata(const std::string& value) {
    ClearMetadata out;
    std::string word;
    auto take = [&] {
        if (word == "panic")
            out.panic = true;
        else if (word == "backtrace")
            out.backtrace = true;
        else if (!word.empty())
            throw Error("\"" + word + "\" is not panic or backtrace (an empty value: neither)");
        word.clear();
    };
    for (char c : value) {
        if (c == ' ' || c == ',' || c == '\t')
            take();
        else
            word += c;
    }
    take();
    return out;
}

// Format=, Compress=, DumpLevel=, Recipient=, RecipientsFile=, ClearMetadata=
// into `keys` (a section's), remembering where Format= and DumpLevel= were
// set; false for another key.
bool set_format_key(DumpFormatKeys& keys, const std::string& key, const std::string& value, const std::string& where) {
    if (set_recipient_key(keys, key, value)) return true;
    if (key == "ClearMetadata") {
        keys.clear_metadata = parse_clear_metadata(value);
        return true;
    }
    auto it = format_setters().find(key);
    if (it == format_setters().end()) return false;
    it->second(keys, value);
    if (key == "Format") keys.kdump_origin = where;
    if (key == "DumpLevel") keys.dump_level_origin = where;
    return true;
}

}  // namespace

void apply_config_text(Config& config, const std::string& text, const std::string& origin) {
    // Work on a copy so that a file with a bad line changes nothing.
    Config next = config;
    std::istringstream in(text);
    std::string raw;
    unsigned line_no = 0;
    bool in_dump_section = false;
    bool in_upload_section = false;
    DumpFormatKeys* domain = nullptr;  // in a [Domain NAME] section
    std::string domain_name;
    auto fail = [&](const std::string& msg) {
        throw Error(origin + ":" + std::to_string(line_no) + ": " + msg);
    };
    while (std::getline(in, raw)) {
        ++line_no;
        std::string line = trim(raw);
        if (line.empty() || line.front() == '#' || line.front() == ';') continue;
        if (line.front() == '[') {
            if (line.back() != ']') fail("unterminated section header \"" + line + "\"");
            std::string section = trim(line.substr(1, line.size() - 2));
            domain = nullptr;
            in_dump_section = section == "Dump";
            in_upload_section = section == "Upload";
            if (in_dump_section || in_upload_section) continue;
            if (section == "Domain" || section.starts_with("Domain ") || section.starts_with("Domain\t")) {
                const std::string name = trim(section.substr(6));
                if (name.empty()) fail("[Domain] needs the guest's name: [Domain NAME]");
                domain = &next.domain_formats[name];
                domain_name = name;
                continue;
            }
            fail("unknown section [" + section + "] (expected [Dump], [Upload] or [Domain NAME])");
        }
        auto eq = line.find('=');
        if (eq == std::string::npos) fail("expected KEY=VALUE, got \"" + line + "\"");
        if (!in_dump_section && !in_upload_section && !domain) fail("KEY=VALUE before the [Dump] section");
        std::string key = trim(line.substr(0, eq));
        std::string value = trim(line.substr(eq + 1));
        const std::string where = origin + ":" + std::to_string(line_no);
        const std::string section = domain ? "Domain " + domain_name : std::string(in_upload_section ? "Upload" : "Dump");
        next.lines.push_back({section, key, value, where});
        if (in_upload_section) {
            auto it = upload_setters().find(key);
            if (it == upload_setters().end())
                fail(is_config_key(key) ? key + "= belongs in [Dump], not [Upload]"
                         : "unknown key \"" + key + "\" in [Upload]");
            try {
                it->second(next, value);
            } catch (const Error& e) {
                fail(key + "=: " + e.message());
            }
            continue;
        }
        if (upload_setters().contains(key)) fail(key + "= belongs in the [Upload] section");
        try {
            if (set_format_key(domain ? *domain : next.dump_format, key, value, where)) continue;
        } catch (const Error& e) {
            fail(key + "=: " + e.message());
        }
        if (domain)
            fail(key + "= cannot be set per domain: a [Domain NAME] section holds Format=, Compress=, DumpLevel=, "
                       "Recipient=, RecipientsFile= and ClearMetadata=");
        auto it = setters().find(key);
        if (it == setters().end()) fail("unknown key \"" + key + "\"");
        try {
            it->second(next, value);
        } catch (const Error& e) {
            fail(key + "=: " + e.message());
        }
    }
    next.files.push_back(origin);
    config = std::move(next);
}

const std::vector<KeyDefault>& key_defaults() {
    static const std::vector<KeyDefault> table = {
        {"DumpDir", XENDUMP_DEFAULT_DUMP_DIR, ""},
        {"Host", "", "$XEN_DUMP_HOST, else \"xen\""},
        {"ControlSocket", XENDUMP_DEFAULT_CONTROL_SOCKET, ""},
        {"ControlGroup", "", "root only"},
        {"OnCrash", "preserve", ""},
        {"MaxParallel", "1", ""},
        {"MaxUse", "", "no limit"},
        {"KeepFree", "5%", ""},
        {"KeepPerDomain", "0", "no limit"},
        {"MaxAge", "0", "no limit"},
        {"MinInterval", "0", "none"},
        {"Digests", "yes", ""},
        {"Live", "no", "requested dumps paused"},
        {"MaxPause", "100", "milliseconds"},
        {"LiveRounds", "5", ""},
        {"Threads", "", "one a core"},
        {"Format", "v1", "", true},
        {"Compress", "zstd", "kdump only", true},
        {"DumpLevel", "0", "kdump only", true},
        {"Recipient", "", "not encrypted", true},
        {"RecipientsFile", "", "not encrypted", true},
        {"ClearMetadata", "", "no panic line or backtrace in clear beside an encrypted dump", true},
        {"Target", "", "no upload", false, "Upload"},
        {"Endpoint", "", "$AWS_ENDPOINT_URL, the profile's endpoint_url, else AWS's", false, "Upload"},
        {"Region", "", "$AWS_REGION, $AWS_DEFAULT_REGION, the profile's, else us-east-1", false, "Upload"},
        {"Mode", "spool", "", false, "Upload"},
        {"KeepLocal", "no", "", false, "Upload"},
        {"PartSize", "16M", "", false, "Upload"},
        {"PartsInFlight", "3", "", false, "Upload"},
    };
    return table;
}

bool is_config_key(std::string_view key) {
    return setters().contains(std::string(key)) || format_setters().contains(std::string(key)) ||
           upload_setters().contains(std::string(key)) || key == "Recipient" || key == "RecipientsFile" || key == "ClearMetadata";
}

void check_config(const Config& config) {
    auto check = [&](const DumpFormatKeys* own, const std::string& whose) {
        const DumpFormatKeys& dump = config.dump_format;
        const bool kdump = own && own->kdump ? *own->kdump : dump.kdump.value_or(false);
        const bool own_level = own && own->dump_level;
        const unsigned level = own_level ? *own->dump_level : dump.dump_level.value_or(0);
        if (kdump || level == 0) return;
        const std::string& level_at = own_level ? own->dump_level_origin : dump.dump_level_origin;
        const std::string& format_at = own && own->kdump ? own->kdump_origin : dump.kdump_origin;
        std::string msg = level_at + ": DumpLevel=" + std::to_string(level) + " needs Format=kdump";
        if (!whose.empty()) msg += ", but " + whose + " is written as v1";
        msg += format_at.empty() ? " (Format= is not set: v1)" : " (Format=v1 at " + format_at + ")";
        throw Error(msg + "; a v1 file keeps every page (its missing pfns mean absent, not left out)");
    };
    check(nullptr, "");
    for (const auto& [name, keys] : config.domain_formats) check(&keys, "domain " + name);
    if (config.upload.mode == UploadMode::stream && config.upload.keep_local) {
        // Where each was set last (the drop-ins may set them apart).
        auto origin_of = [&](const std::string& key) {
            std::string at;
            for (const ConfigLine& l : config.lines)
                if (l.section == "Upload" && l.key == key) at = l.origin;
            return at;
        };
        throw Error(origin_of("KeepLocal") + ": KeepLocal=yes needs Mode=spool, but Mode=stream is set at " +
                    origin_of("Mode") +
                    ": a streamed dump is written straight into the store and has no local copy to keep "
                    "(Mode=spool writes the dump locally, uploads it and, with KeepLocal=yes, keeps it)");
    }
}

DumpFormat Config::format_for(std::string_view domain_name) const {
    DumpFormat f;
    auto take = [&f](const DumpFormatKeys& k) {
        if (k.kdump) f.kdump = *k.kdump;
        if (k.compression) f.compression = *k.compression;
        if (k.dump_level) f.dump_level = *k.dump_level;
    };
    take(dump_format);
    if (auto it = domain_formats.find(domain_name); it != domain_formats.end()) take(it->second);
    return f;
}

std::vector<std::string> Config::recipients_for(std::string_view domain_name) const {
    if (auto it = domain_formats.find(domain_name); it != domain_formats.end() && it->second.recipients)
        return *it->second.recipients;
    return dump_format.recipients.value_or(std::vector<std::string>{});
}

ClearMetadata Config::clear_metadata_for(std::string_view domain_name) const {
    if (auto it = domain_formats.find(domain_name); it != domain_formats.end() && it->second.clear_metadata)
        return *it->second.clear_metadata;
    return dump_format.clear_metadata.value_or(ClearMetadata{});
}

Config load_config(const std::filesystem::path& main_file) {
    return load_config(main_file, main_file == default_config_file() ? MissingConfig::defaults : MissingConfig::error);
}

Config load_config(const std::filesystem::path& main_file, MissingConfig missing) {
    Config config = Config::defaults();
    std::error_code ec;
    // symlink_status: a dangling link is a file named but missing, not absent.
    if (std::filesystem::symlink_status(main_file, ec).type() != std::filesystem::file_type::not_found)
        apply_config_text(config, read_file(main_file), main_file.string());
    else if (missing == MissingConfig::error)
        throw Error("no such configuration file", main_file.string());
    auto dir = drop_in_dir(main_file);
    if (std::filesystem::is_directory(dir, ec)) {
        std::vector<std::filesystem::path> drop_ins;
        for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
            if (entry.path().extension() == ".conf") drop_ins.push_back(entry.path());
        std::sort(drop_ins.begin(), drop_ins.end());
        for (const auto& f : drop_ins) apply_config_text(config, read_file(f), f.string());
    }
    check_config(config);
    return config;
}

void ConfigOverrides::apply(Config& config) const {
    if (host) config.host = *host;
    if (dump_dir) {
        config.dump_dir = *dump_dir;
        config.dump_dir_origin = DumpDirOrigin::command_line;
    }
    if (control_socket) config.control_socket = *control_socket;
    if (threads) config.threads = *threads;
}

std::string UploadConfig::target() const {
    if (bucket.empty()) return {};
    return "s3://" + bucket + (prefix.empty() ? "" : "/" + prefix);
}

unsigned Config::write_threads() const { return threads ? threads : cli::default_threads(); }

}  // namespace xendump::daemon
