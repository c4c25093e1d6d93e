#include "sim/host_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "sim/json_file.hpp"
#include "util/util.hpp"
#include "util/runs.hpp"
#include "xendump/error.hpp"

namespace xendump::sim {

namespace fs = std::filesystem;
using nlohmann::json;

bool DomainState::is_ballooned(uint64_t pfn) const {
    return util::run_holding(ballooned, pfn, &PfnRange::pfn, &PfnRange::count) != ballooned.end();
}

uint64_t DomainState::ballooned_pages() const {
    uint64_t n = 0;
    for (auto& r : ballooned) n += r.count;
    return n;
}

void DomainState::add_ballooned(uint64_t pfn, uint64_t count) {
    ballooned.push_back({pfn, count});
    std::sort(ballooned.begin(), ballooned.end(), [](auto& a, auto& b) { return a.pfn < b.pfn; });
    std::vector<PfnRange> merged;
    for (auto& r : ballooned) {
        if (!merged.empty() && merged.back().pfn + merged.back().count >= r.pfn)
            merged.back().count = std::max(merged.back().pfn + merged.back().count, r.pfn + r.count) - merged.back().pfn;
        else
            merged.push_back(r);
    }
    ballooned = std::move(merged);
}

void DomainState::remove_ballooned(uint64_t pfn, uint64_t count) {
    std::vector<PfnRange> kept;
    for (const PfnRange& r : ballooned) {
        const uint64_t end = r.pfn + r.count;
        if (end <= pfn || r.pfn >= pfn + count) {
            kept.push_back(r);
            continue;
        }
        if (r.pfn < pfn) kept.push_back({r.pfn, pfn - r.pfn});
        if (end > pfn + count) kept.push_back({pfn + count, end - (pfn + count)});
    }
    ballooned = std::move(kept);
}

std::string DomainState::name() const {
    if (destroyed) return "destroyed";
    if (shutdown) return shutdown_reason == ShutdownReason::crash ? "crashed" : "shutdown";
    return pause_count > 0 ? "paused" : "running";
}

DomainState initial_state(const DomainSpec& d) {
    DomainState s;
    switch (d.state) {
        case InitialState::running: break;
        case InitialState::paused: s.pause_count = 1; break;
        case InitialState::crashed: s.shutdown = true; s.shutdown_reason = ShutdownReason::crash; break;
        case InitialState::shutdown: s.shutdown = true; s.shutdown_reason = ShutdownReason::poweroff; break;
    }
    return s;
}

DomainState read_state(const fs::path& path) {
    return use_json_file(path, "cannot open the domain state", "corrupt domain state", [](const json& j) {
        DomainState s;
        s.pause_count = j.at("pause_count").get<unsigned>();
        s.shutdown = j.at("shutdown").get<bool>();
        s.shutdown_reason = static_cast<ShutdownReason>(j.at("shutdown_reason").get<unsigned>());
        s.destroyed = j.at("destroyed").get<bool>();
        s.logdirty = j.value("logdirty", false);
        s.p2m_changes = j.value("p2m_changes", uint64_t{0});
        for (auto& r : j.at("ballooned")) s.ballooned.push_back({r.at(0).get<uint64_t>(), r.at(1).get<uint64_t>()});
        return s;
    });
}

void write_fully(int fd, const void* data, size_t size, const fs::path& path) {
    util::write_all(fd, data, size, path.string());
}

void write_file(const fs::path& path, const void* data, size_t size) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) throw_errno("cannot create", path.string());
    write_fully(fd.get(), data, size, path);
}

void write_state(const fs::path& path, const DomainState& s) {
    json j;
    j["pause_count"] = s.pause_count;
    j["shutdown"] = s.shutdown;
    j["shutdown_reason"] = static_cast<unsigned>(s.shutdown_reason);
    j["destroyed"] = s.destroyed;
    j["logdirty"] = s.logdirty;
    if (s.p2m_changes) j["p2m_changes"] = s.p2m_changes;
    j["ballooned"] = json::array();
    for (auto& r : s.ballooned) j["ballooned"].push_back({r.pfn, r.count});
    replace_file(path, j.dump() + "\n", "the domain state");
}

void replace_file(const fs::path& path, const std::string& text, const std::string& what) {
    fs::path tmp = path;
    tmp += ".tmp." + std::to_string(::getpid());
    write_file(tmp, text.data(), text.size());
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        throw Error("cannot replace " + what, path.string(), std::nullopt, e);
    }
}

HostLock::HostLock(const HostPaths& paths) : fd_(::open(paths.lock().c_str(), O_RDWR | O_CLOEXEC)) {
    if (!fd_) throw_errno("cannot open the host lock", paths.lock().string());
    if (util::retry_eintr([&] { return ::flock(fd_.get(), LOCK_EX); }) != 0)
        throw_errno("cannot lock", paths.lock().string());
}

void append_event(const HostPaths& paths, const std::string& line) {
    UniqueFd fd(::open(paths.events().c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
    if (!fd) throw_errno("cannot open", paths.events().string());
    std::string text = line + "\n";
    if (util::write_full(fd.get(), text.data(), text.size()) != text.size())
        throw_errno("cannot append to", paths.events().string());
}

}  // namespace xendump::sim
