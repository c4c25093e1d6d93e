// The listening side of the control socket: created with its directory
// (0755) and mode 0660 (group ControlGroup when set), refusing to steal the
// socket of a service that still answers or to replace anything but a stale
// socket; who may ask, decided from SO_PEERCRED/SO_PEERGROUPS: root, or a
// member of ControlGroup; and the server that answers on it in a thread of
// its own, so that nothing on the socket can delay the crash watch.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control_protocol.hpp"
#include "xendump/fd.hpp"

namespace xendump::daemon {

class ControlListener {
public:
    ControlListener(std::filesystem::path path, const std::string& group);
    ~ControlListener();  // removes the socket file
    ControlListener(const ControlListener&) = delete;
    ControlListener& operator=(const ControlListener&) = delete;
    int fd() const { return fd_.get(); }
    const std::filesystem::path& path() const { return path_; }
    // An invalid fd when nothing was pending or accept4() failed; then
    // `error` (when given) is its errno (EAGAIN: nothing pending).
    UniqueFd accept(int* error = nullptr);

private:
    std::filesystem::path path_;
    UniqueFd fd_;
};

struct PeerCheck {
    bool allowed = false;
    uid_t uid = 0;
    pid_t pid = 0;
    std::string refusal;  // the message sent to a refused peer
};

// `group` empty: root only.
PeerCheck check_peer(int connection_fd, const std::string& group);
// The same with the group already looked up (nullopt: root only).
PeerCheck check_peer(int connection_fd, std::optional<gid_t> gid, const std::string& group);

struct ControlServerLimits {
    // Connections served at once (each has a thread and a descriptor); more
    // wait in the listen backlog until one ends. Lowered at start so that
    // they can take at most half of the descriptors left (RLIMIT_NOFILE):
    // the rest stays for the dumps.
    unsigned max_connections = 32;
    // An allowed client has this long to send its request line, and a reply
    // that the client does not read for this long drops the connection.
    std::chrono::milliseconds idle_timeout{10000};
    // accept() out of descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM): the
    // socket is left alone this long instead of being polled in a spin.
    std::chrono::milliseconds exhausted_pause{250};
};

// Answers on a ControlListener. One thread accepts: it checks the peer
// before anything else (a refused peer gets its error line and is closed at
// once, without a thread), and hands each allowed connection, with its
// first request line parsed, to `handler` in a thread of its own, at most
// `max_connections` at a time. A line that is not a JSON object gets an
// error reply. Errors never leave the server: they are logged.
class ControlServer {
public:
    using Handler = std::function<void(JsonLineConnection&, const PeerCheck&, const nlohmann::json& request)>;

    ControlServer(std::unique_ptr<ControlListener> listener, const std::string& group, Handler handler,
                  ControlServerLimits limits = {});
    ~ControlServer();  // stop()
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // Stops accepting and removes the socket; connections go on.
    void close_listener();
    // close_listener(), then shuts every connection down and joins the threads.
    void stop();

    struct Stats {
        uint64_t accepted = 0;         // allowed connections handed to a thread
        uint64_t refused = 0;          // peers refused by SO_PEERCRED
        uint64_t accept_failures = 0;  // accept() out of descriptors
        uint64_t wakeups = 0;          // times the accepting thread woke up
        unsigned active = 0;           // connections being served now
    };
    Stats stats() const;
    const ControlServerLimits& limits() const { return limits_; }

private:
    void accept_loop();
    void accept_one();
    void serve(JsonLineConnection& conn, const PeerCheck& peer);
    void reap_unlocked();
    void drain_refused(const std::vector<pollfd>& fds);
    void note_refusal(const PeerCheck& peer);

    std::unique_ptr<ControlListener> listener_;
    std::string group_;
    std::optional<gid_t> gid_;
    Handler handler_;
    ControlServerLimits limits_;
    UniqueFd wake_;  // eventfd: stop, or a connection ended
    std::atomic<bool> stopping_{false};
    std::chrono::steady_clock::time_point paused_until_{};
    std::chrono::steady_clock::time_point last_refusal_log_{};
    uint64_t refusals_not_logged_ = 0;
    struct Refused {
        UniqueFd fd;
        std::chrono::steady_clock::time_point until;
    };
    std::deque<Refused> refused_;  // refused peers, told and kept briefly (accepting thread only)

    struct Connection {
        std::thread thread;
        int fd = -1;        // owned by the thread; valid while !done
        bool done = false;  // guarded by mutex_
    };
    mutable std::mutex mutex_;
    std::list<Connection> connections_;
    Stats stats_;
    std::thread acceptor_;
};

}  // namespace xendump::daemon
