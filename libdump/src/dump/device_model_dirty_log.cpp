// QMP's xen-set-global-dirty-log on the device model's socket
// (device_model_dirty_log.hpp). QMP: the server greets with {"QMP": ...};
// {"execute": "qmp_capabilities"} leaves negotiation; each command is
// answered by {"return": ...} or {"error": {"class", "desc"}}, with
// {"event": ...} lines in between; one JSON object a line.
#include "dump/device_model_dirty_log.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "xendump/error.hpp"
#include "xendump/text.hpp"

namespace xendump::dump {

namespace {

constexpr size_t kMaxLine = 64 * 1024;  // QMP's answers here are short; a longer line is refused

// What QEMU said, in an error: its first 200 bytes under the one rule for
// untrusted text (xendump/text.hpp).
std::string one_line(const std::string& text) { return escape_text(std::string_view(text).substr(0, 200)); }

}  // namespace

std::filesystem::path qmp_socket_dir() {
    const char* dir = std::getenv("XEN_DUMP_QMP_DIR");
    return dir && *dir ? std::filesystem::path(dir) : std::filesystem::path("/var/run/xen");
}

std::filesystem::path qmp_socket_of(uint32_t domid) {
    return qmp_socket_dir() / ("qmp-libxl-" + std::to_string(domid));
}

DeviceModelDirtyLog::DeviceModelDirtyLog(std::filesystem::path socket, std::chrono::milliseconds timeout,
                                         Initial initial)
    : socket_(std::move(socket)), timeout_(timeout) {
    const std::string name = socket_.string();
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (name.size() >= sizeof(addr.sun_path)) throw Error("the device model's QMP socket path is too long", name);
    std::memcpy(addr.sun_path, name.c_str(), name.size() + 1);
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd_) throw_errno("socket", name);
    if (::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0)
        throw_errno("cannot connect to the device model's QMP socket", name);
    const std::string greeting = read_line();
    const auto g = nlohmann::json::parse(greeting, nullptr, false);
    if (!g.is_object() || !g.contains("QMP"))
        throw Error("the device model's QMP socket did not greet as QMP: \"" + one_line(greeting) + "\"", name);
    execute("qmp_capabilities", "");
    execute("xen-set-global-dirty-log", initial == Initial::on ? R"({"enable": true})" : R"({"enable": false})");
    on_ = initial == Initial::on;
}

DeviceModelDirtyLog::~DeviceModelDirtyLog() {
    if (!on_) return;
    try {
        release();
    } catch (const Error&) {
        // Nothing to report it to here (an error path already): Xen's log-dirty,
        // turned off right after, is what QEMU's marking feeds.
    }
}

void DeviceModelDirtyLog::release() {
    if (!on_) return;
    on_ = false;
    execute("xen-set-global-dirty-log", R"({"enable": false})");
}

std::string DeviceModelDirtyLog::read_line() {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
        const auto nl = buffered_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buffered_.substr(0, nl);
            buffered_.erase(0, nl + 1);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            return line;
        }
        if (buffered_.size() > kMaxLine)
            throw Error("the device model's QMP answer is longer than " + std::to_string(kMaxLine) + " bytes",
                        socket_.string());
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            throw Error("the device model did not answer on its QMP socket within " +
                            std::to_string(timeout_.count()) + " ms", socket_.string());
        pollfd p{fd_.get(), POLLIN, 0};
        const int r = ::poll(&p, 1, static_cast<int>(left.count()));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw_errno("poll", socket_.string());
        if (r == 0) continue;
        char buf[4096];
        const ssize_t n = ::read(fd_.get(), buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno("cannot read the device model's QMP socket", socket_.string());
        if (n == 0) throw Error("the device model closed its QMP socket", socket_.string());
        buffered_.append(buf, static_cast<size_t>(n));
    }
}

void DeviceModelDirtyLog::execute(const std::string& command, const std::string& arguments) {
    std::string request = R"({"execute": ")" + command + "\"";
    if (!arguments.empty()) request += R"(, "arguments": )" + arguments;
    request += "}\n";
    for (size_t done = 0; done < request.size();) {
        const ssize_t n = ::send(fd_.get(), request.data() + done, request.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno("cannot send " + command + " to the device model", socket_.string());
        done += static_cast<size_t>(n);
    }
    for (;;) {
        const std::string line = read_line();
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object())
            throw Error("the device model answered " + command + " with \"" + one_line(line) + "\", not QMP",
                        socket_.string());
        if (j.contains("event")) continue;
        if (j.contains("return")) return;
        if (j.contains("error")) {
            const auto& e = j["error"];
            std::string desc = e.is_object() && e.contains("desc") && e["desc"].is_string()
                                   ? e["desc"].get<std::string>() : std::string("(no description)");
            throw Error("the device model refused " + command + ": " + one_line(desc), socket_.string());
        }
        throw Error("the device model answered " + command + " with \"" + one_line(line) + "\"", socket_.string());
    }
}

}  // namespace xendump::dump
