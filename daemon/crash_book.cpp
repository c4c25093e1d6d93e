#include "crash_book.hpp"

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sidecar.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::daemon {

CrashBook::CrashBook(std::filesystem::path state_file) : file_(std::move(state_file)) {
    std::ifstream in(file_);
    if (!in) return;
    std::ostringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    try {
        if (j.is_discarded() || !j.is_object()) throw Error("not a JSON object");
        // Named copies: items() of a temporary would dangle.
        const nlohmann::json handled = j.value("handled", nlohmann::json::array());
        const nlohmann::json last_dump = j.value("last_dump", nlohmann::json::object());
        const nlohmann::json skipped = j.value("skipped", nlohmann::json::object());
        for (const auto& h : handled)
            handled_.insert(CrashKey{h.at("domid").get<uint32_t>(), h.at("uuid").get<std::string>()});
        for (const auto& [guest, t] : last_dump.items()) last_dump_[guest] = t.get<int64_t>();
        for (const auto& [guest, n] : skipped.items()) skipped_[guest] = n.get<unsigned>();
    } catch (const std::exception& e) {
        handled_.clear();
        last_dump_.clear();
        skipped_.clear();
        std::error_code ec;
        std::filesystem::rename(file_, file_.string() + ".bad", ec);
        load_warning_ = "ignoring damaged state file " + file_.string() + " (" + e.what() + "), kept as .bad";
    }
}

std::vector<CrashKey> CrashBook::observe(const std::vector<DomainInfo>& domains) {
    std::set<CrashKey> crashed_now;
    for (const auto& d : domains)
        if (d.crashed() && !d.dying) crashed_now.insert(CrashKey{d.domid, uuid_to_string(d.handle)});
    bool changed = false;
    std::erase_if(retries_, [&](const auto& r) { return !crashed_now.count(r.first); });
    for (auto it = handled_.begin(); it != handled_.end();) {
        if (!crashed_now.count(*it)) {
            it = handled_.erase(it);  // the instance ended: a later crash is a new one
            changed = true;
        } else {
            ++it;
        }
    }
    if (changed) save();
    std::vector<CrashKey> fresh;
    for (const auto& k : crashed_now)
        if (!handled_.count(k) && !retries_.count(k) && in_progress_.insert(k).second) fresh.push_back(k);
    return fresh;
}

void CrashBook::mark_handled(const CrashKey& key) {
    in_progress_.erase(key);
    retries_.erase(key);
    handled_.insert(key);
    save();
}

void CrashBook::mark_abandoned(const CrashKey& key) {
    in_progress_.erase(key);
    retries_.erase(key);
}

void CrashBook::mark_waiting(const CrashKey& key, const std::string& error, int64_t not_before,
                             uint64_t room_needed) {
    in_progress_.erase(key);
    CrashRetry& r = retries_[key];
    r.error = error;
    r.room_needed = room_needed;
    ++r.attempts;
    r.not_before = not_before;
    r.waiting = true;
}

std::vector<CrashKey> CrashBook::due_retries(int64_t now) const {
    std::vector<CrashKey> due;
    for (const auto& [key, r] : retries_)
        if (r.waiting && r.not_before <= now) due.push_back(key);
    return due;
}

void CrashBook::take_retry(const CrashKey& key) {
    auto it = retries_.find(key);
    if (it == retries_.end() || !it->second.waiting) return;
    it->second.waiting = false;
    in_progress_.insert(key);
}

bool CrashBook::within_min_interval(const std::string& guest, int64_t now, int64_t interval) {
    if (interval <= 0) return false;
    auto it = last_dump_.find(guest);
    if (it == last_dump_.end() || now - it->second >= interval) return false;
    ++skipped_[guest];
    save();
    return true;
}

void CrashBook::record_dump_time(const std::string& guest, int64_t now) {
    last_dump_[guest] = now;
    save();
}

unsigned CrashBook::skipped(const std::string& guest) const {
    auto it = skipped_.find(guest);
    return it == skipped_.end() ? 0 : it->second;
}

void CrashBook::save() {
    try {
        write_file();
        save_error_.clear();
    } catch (const std::exception& e) {
        save_error_ = e.what();
        std::error_code ec;
        std::filesystem::remove(file_.string() + ".new", ec);
    }
}

void CrashBook::flush() {
    if (!save_error_.empty()) save();
}

void CrashBook::write_file() const {
    nlohmann::ordered_json j;
    j["handled"] = nlohmann::json::array();
    for (const auto& k : handled_) j["handled"].push_back({{"domid", k.domid}, {"uuid", k.uuid}});
    j["last_dump"] = last_dump_;
    j["skipped"] = skipped_;
    replace_file_atomically(file_, j.dump(2) + "\n", 0600);
}

}  // namespace xendump::daemon
