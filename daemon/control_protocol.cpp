#include "control_protocol.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::daemon {

namespace {
constexpr size_t kMaxLine = 1 << 20;
}

void JsonLineConnection::send(const nlohmann::json& message) {
    std::string line = message.dump() + "\n";
    size_t off = 0;
    while (off < line.size()) {
        const ssize_t n =
            util::retry_eintr([&] { return ::send(fd_.get(), line.data() + off, line.size() - off, MSG_NOSIGNAL); });
        if (n < 0) throw_errno("control connection closed");
        off += static_cast<size_t>(n);
    }
}

nlohmann::json control_error(const std::string& kind, const std::string& message) {
    return {{"event", "error"}, {"kind", kind}, {"message", message}};
}

nlohmann::json parse_control_message(const std::string& line) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error("malformed control message: not JSON", "control message", e.byte ? e.byte - 1 : 0);
    }
    if (!j.is_object()) throw Error("malformed control message: not a JSON object", "control message", 0);
    return j;
}

std::optional<nlohmann::json> JsonLineConnection::receive(std::chrono::milliseconds timeout) {
    auto line = receive_line(timeout);
    if (!line) return std::nullopt;
    return parse_control_message(*line);
}

std::optional<std::string> JsonLineConnection::receive_line(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            return line;
        }
        if (buffer_.size() > kMaxLine)
            throw Error("control message too long (over " + std::to_string(kMaxLine) + " bytes without a newline)");
        int wait_ms = -1;
        if (timeout.count() >= 0) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) return std::nullopt;
            wait_ms = static_cast<int>(left.count());
        }
        pollfd p{fd_.get(), POLLIN, 0};
        int r = ::poll(&p, 1, wait_ms);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw_errno("poll on control connection");
        }
        if (r == 0) return std::nullopt;
        char chunk[4096];
        ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            throw_errno("control connection failed");
        }
        if (n == 0) throw Error("control connection closed by the peer");
        buffer_.append(chunk, static_cast<size_t>(n));
    }
}

bool JsonLineConnection::peer_closed() {
    pollfd p{fd_.get(), POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) return true;
    return false;
}

std::optional<JsonLineConnection> connect_control(const std::filesystem::path& socket_path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.string().size() >= sizeof addr.sun_path)
        throw Error("control socket path too long", socket_path.string());
    std::strcpy(addr.sun_path, socket_path.c_str());
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) throw_errno("cannot create socket");
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        if (errno == ENOENT || errno == ECONNREFUSED || errno == ENOTDIR) return std::nullopt;
        throw_errno("cannot connect to the service", socket_path.string());
    }
    return JsonLineConnection(std::move(fd));
}

nlohmann::json control_request(const std::filesystem::path& socket_path, const nlohmann::json& request,
                               std::chrono::milliseconds timeout) {
    auto conn = connect_control(socket_path);
    if (!conn) throw Error("the service is not running (no control socket)", socket_path.string());
    conn->send(request);
    auto reply = conn->receive(timeout);
    if (!reply) throw Error("no answer from the service", socket_path.string());
    return *reply;
}

}  // namespace xendump::daemon
