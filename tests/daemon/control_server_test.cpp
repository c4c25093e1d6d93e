// The control socket's server on its own: a reply to every malformed line,
// at most max_connections served at once, idle clients dropped, and no spin
// when accept() runs out of descriptors.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "control_protocol.hpp"
#include "control_server.hpp"
#include "journal_log.hpp"
#include "test_support.hpp"

using namespace xendump::daemon;
using xendump::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A client socket, connected without blocking (-1: the backlog is full).
int connect_raw(const fs::path& socket) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// Sends as much of `text` as the peer takes (it may hang up midway).
void send_all(int fd, const std::string& text) {
    size_t off = 0;
    while (off < text.size()) {
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, 10000) <= 0 || (p.revents & (POLLERR | POLLHUP))) return;
        ssize_t n = ::send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN) return;
        if (n > 0) off += static_cast<size_t>(n);
    }
}

std::string read_line(int fd, std::chrono::milliseconds timeout) {
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        char c;
        ssize_t n = ::recv(fd, &c, 1, 0);
        if (n <= 0) return line;
        if (c == '\n') return line;
        line += c;
    }
    return line;
}

struct Server {
    TempDir dir;
    fs::path socket = dir / "control.sock";
    std::atomic<int> served{0};
    std::atomic<bool> hold{false};
    std::unique_ptr<ControlServer> server;

    explicit Server(ControlServerLimits limits = {}) {
        log_to_stderr_only(true);
        server = std::make_unique<ControlServer>(
            std::make_unique<ControlListener>(socket, ""), "",
            [this](JsonLineConnection& conn, const PeerCheck&, const nlohmann::json& request) {
                ++served;
                while (hold) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                conn.send({{"event", "echo"}, {"command", request.at("command")}});
            },
            limits);
    }
};

}  // namespace

TEST(ControlServer, MalformedLinesGetAnErrorReply) {
    Server s;
    for (const std::string& bad : std::vector<std::string>{"{not json\n", "[1]\n", "42\n", std::string(2 << 20, 'x')}) {
        int fd = connect_raw(s.socket);
        ASSERT_GE(fd, 0);
        send_all(fd, bad);
        auto reply = nlohmann::json::parse(read_line(fd, std::chrono::seconds(10)), nullptr, false);
        ::close(fd);
        ASSERT_FALSE(reply.is_discarded()) << bad.substr(0, 20);
        EXPECT_EQ(reply["event"], "error");
        EXPECT_EQ(reply["kind"], "request");
        EXPECT_NE(reply.value("message", "").find("control message"), std::string::npos) << reply.dump();
    }
    // A good request still gets through, and the bad ones never reached the handler.
    EXPECT_EQ(control_request(s.socket, {{"command", "hello"}})["command"], "hello");
    EXPECT_EQ(s.served.load(), 1);
}

TEST(ControlServer, ConnectionsAreBoundedAndIdleOnesDropped) {
    ControlServerLimits limits;
    limits.max_connections = 4;
    limits.idle_timeout = std::chrono::milliseconds(300);
    Server s(limits);
    std::vector<int> idle;
    for (int i = 0; i < 12; ++i)
        if (int fd = connect_raw(s.socket); fd >= 0) idle.push_back(fd);
    ASSERT_GE(idle.size(), 8u);
    unsigned most = 0;
    for (int i = 0; i < 40; ++i) {
        most = std::max(most, s.server->stats().active);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_LE(most, 4u);
    // Each idle client, in turn, is told and dropped.
    for (int fd : idle) {
        std::string line = read_line(fd, std::chrono::seconds(10));
        EXPECT_NE(line.find("no request within"), std::string::npos) << line;
        ::close(fd);
    }
    EXPECT_EQ(control_request(s.socket, {{"command", "after"}})["command"], "after");
    EXPECT_LE(s.server->stats().active, 1u);
}

TEST(ControlServer, RequestsWaitForAFreeSlotInsteadOfFailing) {
    ControlServerLimits limits;
    limits.max_connections = 2;
    Server s(limits);
    s.hold = true;
    std::vector<std::thread> clients;
    std::atomic<int> answered{0};
    for (int i = 0; i < 6; ++i)
        clients.emplace_back([&] {
            if (control_request(s.socket, {{"command", "x"}})["event"] == "echo") ++answered;
        });
    while (s.served < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(s.served.load(), 2);  // the others wait in the backlog
    s.hold = false;
    for (auto& t : clients) t.join();
    EXPECT_EQ(answered.load(), 6);
}

TEST(ControlServer, OutOfDescriptorsPausesInsteadOfSpinning) {
    Server s;
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
    // Two clients, then every descriptor of the process taken.
    int a = connect_raw(s.socket);
    ASSERT_GE(a, 0);
    rlimit low = old;
    low.rlim_cur = 128;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    std::vector<int> hog;
    s.hold = true;  // (nothing reaches the handler while accept fails)
    // The server may have taken `a` already; make a fresh one wait in the backlog.
    int b = connect_raw(s.socket);
    ASSERT_GE(b, 0);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) hog.push_back(fd);
    int c = -1;
    {
        // One more client needs one descriptor.
        ::close(hog.back());
        hog.pop_back();
        c = connect_raw(s.socket);
        ASSERT_GE(c, 0);
    }
    auto before = s.server->stats();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    auto after = s.server->stats();
    for (int fd : hog) ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &old);
    EXPECT_GE(after.accept_failures, 1u);
    EXPECT_LT(after.wakeups - before.wakeups, 30u) << "the accepting thread spun";
    // With descriptors back, the waiting clients are served.
    s.hold = false;
    for (int fd : {a, b, c}) {
        std::string req = "{\"command\":\"late\"}\n";
        (void)!::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    }
    for (int fd : {a, b, c}) {
        auto reply = nlohmann::json::parse(read_line(fd, std::chrono::seconds(10)), nullptr, false);
        ASSERT_FALSE(reply.is_discarded());
        EXPECT_EQ(reply["event"], "echo");
        ::close(fd);
    }
}
