#include "dump/logdirty_record.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "dump/device_model_dirty_log.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/hypervisor.hpp"
#include "xendump/logdirty_records.hpp"
#include "xendump/text.hpp"

namespace fs = std::filesystem;

namespace xendump {

namespace {

constexpr const char* kPrefix = ".xen-dumpd-logdirty-";
constexpr const char* kSuffix = ".json";
constexpr uintmax_t kMaxRecord = 4096;

// Field 22 of /proc/PID/stat (the process's start, in clock ticks since
// boot): with the pid, it tells the dumper from a later process given its
// pid. "" when there is no such process or no /proc.
std::string start_time_of(long pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    if (!in || !std::getline(in, stat)) return "";
    const auto close = stat.rfind(')');  // the command name may hold anything, ')' too
    if (close == std::string::npos) return "";
    std::istringstream fields(stat.substr(close + 1));
    std::string f;
    for (int field = 3; field <= 22 && fields >> f; ++field)
        if (field == 22) return f;
    return "";
}

bool process_runs(long pid, const std::string& start) {
    if (pid <= 0) return false;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
    const std::string now = start_time_of(pid);
    return now.empty() || now == start;  // without /proc: the pid alone
}

struct Record {
    uint32_t domid = 0;
    std::string uuid;
    long pid = 0;
    std::string start;
    bool device_model = false;
};

Record read_record(const fs::path& file) {
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    if (ec) throw Error("cannot read the record: " + ec.message(), file.string());
    if (size > kMaxRecord) throw Error("not a log-dirty record (" + std::to_string(size) + " bytes)", file.string());
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    const auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (!j.is_object() || !j.contains("domid") || !j["domid"].is_number_unsigned() || !j.contains("uuid") ||
        !j["uuid"].is_string() || !j.contains("pid") || !j["pid"].is_number_integer())
        throw Error("not a log-dirty record", file.string());
    Record r;
    r.domid = j["domid"].get<uint32_t>();
    r.uuid = j["uuid"].get<std::string>();
    r.pid = j["pid"].get<long>();
    r.start = j.value("pid_start", std::string());
    r.device_model = j.value("device_model", false);
    return r;
}

// One record whose dumper is gone: what it says was on goes off. Returns
// the line for the log; "" when its dumper still runs.
std::string release(Hypervisor& hv, const fs::path& file) {
    Record r;
    try {
        r = read_record(file);
    } catch (const Error& e) {
        return std::string("kept: ") + e.what();
    }
    const std::string dom = "domain " + std::to_string(r.domid);
    if (process_runs(r.pid, r.start)) return "";
    const std::string who = "a live dump of " + dom + " (process " + std::to_string(r.pid) + ", gone)";
    std::error_code ec;
    const auto info = hv.domain_info(r.domid);
    if (!info || uuid_to_string(info->handle) != r.uuid) {
        fs::remove(file, ec);
        return who + " left a log-dirty record; the domain is gone" +
               std::string(info ? " (its id is another guest's now)" : "") + ": record removed, nothing turned off";
    }
    std::string done;
    if (r.device_model) {
        try {
            dump::DeviceModelDirtyLog(dump::qmp_socket_of(r.domid), std::chrono::seconds(10),
                                      dump::DeviceModelDirtyLog::Initial::off);
            done = " and its device model's dirty logging";
        } catch (const Error& e) {
            done = " (its device model's dirty logging could not be turned off: " + std::string(e.what()) + ")";
        }
    }
    try {
        hv.disable_logdirty(r.domid);
    } catch (const Error& e) {
        return who + " left log-dirty mode on; it could not be turned off (" + e.what() + "): record kept, " +
               file.string();
    }
    fs::remove(file, ec);
    return "turned off log-dirty mode" + done + ", which " + who + " had left on";
}

}  // namespace

std::vector<std::string> release_stale_logdirty(Hypervisor& hv, const fs::path& dir, std::optional<uint32_t> domid) {
    std::vector<std::string> lines;
    if (dir.empty()) return lines;
    std::vector<fs::path> files;
    if (domid) {
        files.push_back(dump::LogDirtyRecord::path_of(dir, *domid));
    } else {
        std::error_code ec;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (name.starts_with(kPrefix) && name.ends_with(kSuffix)) files.push_back(it->path());
        }
    }
    for (const auto& f : files) {
        std::error_code ec;
        if (!fs::is_regular_file(f, ec)) continue;
        std::string line = release(hv, f);
        if (!line.empty()) lines.push_back(std::move(line));
    }
    return lines;
}

namespace dump {

fs::path LogDirtyRecord::path_of(const fs::path& dir, uint32_t domid) {
    return dir / (kPrefix + std::to_string(domid) + kSuffix);
}

LogDirtyRecord::LogDirtyRecord(fs::path dir, Hypervisor& hv, uint32_t domid) : dir_(std::move(dir)), domid_(domid) {
    if (dir_.empty()) return;
    auto lines = release_stale_logdirty(hv, dir_, domid_);
    if (!lines.empty()) released_ = lines.front();
}

LogDirtyRecord::~LogDirtyRecord() { off(); }

void LogDirtyRecord::on(const std::string& uuid, bool device_model) {
    if (dir_.empty()) return;
    const fs::path file = path_of(dir_, domid_);
    nlohmann::ordered_json j;
    j["domid"] = domid_;
    j["uuid"] = uuid;
    j["pid"] = static_cast<long>(::getpid());
    j["pid_start"] = start_time_of(::getpid());
    j["device_model"] = device_model;
    const std::string text = j.dump() + "\n";
    std::error_code ec;
    fs::remove(file, ec);  // a record of this domain left here: released (or kept, unreadable) by the constructor
    try {
        AtomicFile f(file, 0600);
        if (::write(f.fd(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
            throw_errno("cannot write the log-dirty record", file.string());
        f.commit();
    } catch (const Error& e) {
        throw Error(std::string("cannot record that log-dirty mode is on (so that it can be turned off if this "
                                "dump is killed): ") + e.what(),
                    "domain " + std::to_string(domid_));
    }
    written_ = true;
}

void LogDirtyRecord::off() noexcept {
    if (!written_) return;
    written_ = false;
    std::error_code ec;
    fs::remove(path_of(dir_, domid_), ec);
}

}  // namespace dump

}  // namespace xendump
