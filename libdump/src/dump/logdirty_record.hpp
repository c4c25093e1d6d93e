// One consistent live dump's record of the log-dirty mode it turned on
// (xendump/logdirty_records.hpp): written once Xen turned it on, removed
// once it is off again, and by the destructor on every other path that
// turns it off (an error, a cancel, a restart of the pre-copy).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace xendump {
class Hypervisor;
}

namespace xendump::dump {

class LogDirtyRecord {
public:
    // `dir` empty: no record is kept. First releases a record of `domid`
    // that a dumper that is gone left behind (its line in released()).
    LogDirtyRecord(std::filesystem::path dir, Hypervisor& hv, uint32_t domid);
    ~LogDirtyRecord();
    LogDirtyRecord(const LogDirtyRecord&) = delete;
    LogDirtyRecord& operator=(const LogDirtyRecord&) = delete;

    // Log-dirty is on for this dump; `device_model`: its device model is
    // about to be told to log as well. Error naming the file when the
    // record cannot be written (the caller then turns log-dirty off).
    void on(const std::string& uuid, bool device_model);
    // Log-dirty is off again: the record goes.
    void off() noexcept;
    // What the release of a stale record of this domain did ("" if nothing).
    const std::string& released() const noexcept { return released_; }

    static std::filesystem::path path_of(const std::filesystem::path& dir, uint32_t domid);

private:
    std::filesystem::path dir_;
    uint32_t domid_;
    std::string released_;
    bool written_ = false;
};

}  // namespace xendump::dump
