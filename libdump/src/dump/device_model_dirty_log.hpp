// The device model's part of a consistent live dump of an HVM guest (issue
// 35 item 2). QEMU writes into the guest's memory itself (its emulated
// disks' and NICs' DMA) through mappings Xen's log-dirty mode does not see;
// it marks those pages dirty in Xen's bitmap only while it is told to, by
// the QMP command xen-set-global-dirty-log, which libxl sends for a live
// migration. A pre-copy sends it too: on before the pass, off after the
// final round, and off on every other path (the destructor).
//
// libxl gives each device model a QMP socket, qmp-libxl-DOMID in its run
// directory (/var/run/xen; XEN_DUMP_QMP_DIR names another, as for a
// simulated host's tests). PV and PVH guests have no device model.
//
// The socket's answers are untrusted input (QEMU runs the guest's devices):
// each line is bounded, parsed as JSON, and only its "return" or "error"
// is used.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "xendump/fd.hpp"

namespace xendump::dump {

// $XEN_DUMP_QMP_DIR, else /var/run/xen.
std::filesystem::path qmp_socket_dir();
// qmp_socket_dir()/qmp-libxl-DOMID.
std::filesystem::path qmp_socket_of(uint32_t domid);

class DeviceModelDirtyLog {
public:
    // on: dirty logging turned on (and off by release() or the destructor);
    // off: turned off only (what a killed dumper left on:
    // xendump/logdirty_records.hpp).
    enum class Initial { on, off };
    // Connects to `socket`, negotiates QMP and turns the device model's
    // dirty logging on (or off); Error naming the socket and QEMU's answer
    // when it cannot.
    explicit DeviceModelDirtyLog(std::filesystem::path socket,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                 Initial initial = Initial::on);
    ~DeviceModelDirtyLog();  // off, if still on (errors cannot be reported here)
    DeviceModelDirtyLog(const DeviceModelDirtyLog&) = delete;
    DeviceModelDirtyLog& operator=(const DeviceModelDirtyLog&) = delete;

    // Off now; Error when QEMU refuses (the dump is complete by then: the
    // caller warns).
    void release();
    const std::filesystem::path& socket() const noexcept { return socket_; }

private:
    void execute(const std::string& command, const std::string& arguments);
    std::string read_line();

    std::filesystem::path socket_;
    std::chrono::milliseconds timeout_;
    UniqueFd fd_;
    std::string buffered_;
    bool on_ = false;
};

}  // namespace xendump::dump
