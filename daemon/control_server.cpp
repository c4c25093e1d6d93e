#include "control_server.hpp"

#include <dirent.h>
#include <grp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>
#include <vector>

#include "control_protocol.hpp"
#include "journal_log.hpp"
#include "xendump/error.hpp"

namespace xendump::daemon {

namespace {

std::optional<gid_t> group_id(const std::string& group) {
    if (group.empty()) return std::nullopt;
    std::vector<char> buf(16384);
    struct group gr {};
    struct group* found = nullptr;
    if (::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || !found) return std::nullopt;
    return found->gr_gid;
}

// Descriptors this process may still open (RLIMIT_NOFILE minus those open).
uint64_t descriptors_left() {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
    uint64_t open = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (const dirent* e = ::readdir(d))
            if (e->d_name[0] != '.') ++open;
        ::closedir(d);
    }
    return rl.rlim_cur > open ? rl.rlim_cur - open : 0;
}

bool out_of_descriptors(int error) {
    return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
}

// One line to a peer that gets nothing else: never blocks.
void send_and_forget(int fd, const nlohmann::json& message) {
    std::string line = message.dump() + "\n";
    (void)!::send(fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

void wake(int eventfd) {
    uint64_t one = 1;
    (void)!::write(eventfd, &one, sizeof one);
}

}  // namespace

ControlListener::ControlListener(std::filesystem::path path, const std::string& group) : path_(std::move(path)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.string().size() >= sizeof addr.sun_path) throw Error("control socket path too long", path_.string());
    std::strcpy(addr.sun_path, path_.c_str());

    std::error_code ec;
    auto dir = path_.parent_path();
    if (!std::filesystem::is_directory(dir, ec)) {
        std::filesystem::create_directories(dir, ec);
        if (ec) throw Error("cannot create directory: " + ec.message(), dir.string());
        ::chmod(dir.c_str(), 0755);
    }
    // A socket file left by a killed service is stale; one that answers is
    // not. Anything else at that name (a file, a symlink) is not ours to remove.
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            throw Error("refusing to replace something that is not a socket (only a stale socket is replaced)",
                        path_.string());
        if (connect_control(path_)) throw Error("another xen-dumpd is already listening", path_.string());
        if (::unlink(path_.c_str()) != 0 && errno != ENOENT) throw_errno("cannot remove stale socket", path_.string());
    } else if (errno != ENOENT) {
        throw_errno("cannot inspect control socket path", path_.string());
    }
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd_) throw_errno("cannot create control socket");
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        throw_errno("cannot bind control socket", path_.string());
    auto gid = group_id(group);
    if (!group.empty() && !gid) {
        ::unlink(path_.c_str());
        throw Error("no such group \"" + group + "\" (ControlGroup=)");
    }
    // The file mode is a first gate; SO_PEERCRED below is the real check.
    if (gid && ::chown(path_.c_str(), 0, *gid) != 0) throw_errno("cannot chown control socket", path_.string());
    if (::chmod(path_.c_str(), gid ? 0660 : 0600) != 0) throw_errno("cannot chmod control socket", path_.string());
    if (::listen(fd_.get(), 16) != 0) throw_errno("cannot listen on control socket", path_.string());
}

ControlListener::~ControlListener() {
    if (fd_) ::unlink(path_.c_str());
}

UniqueFd ControlListener::accept(int* error) {
    UniqueFd fd(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (error) *error = fd ? 0 : errno;
    return fd;
}

PeerCheck check_peer(int connection_fd, const std::string& group) {
    return check_peer(connection_fd, group_id(group), group);
}

PeerCheck check_peer(int connection_fd, std::optional<gid_t> gid, const std::string& group) {
    PeerCheck check;
    struct ucred cred {};
    socklen_t len = sizeof cred;
    if (::getsockopt(connection_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        check.refusal = "permission denied: cannot identify the requesting process";
        return check;
    }
    check.uid = cred.uid;
    check.pid = cred.pid;
    if (cred.uid == 0) {
        check.allowed = true;
        return check;
    }
    if (gid) {
        if (cred.gid == *gid) {
            check.allowed = true;
            return check;
        }
        // Supplementary groups of the peer, as of connect() (Linux >= 4.13).
        std::vector<gid_t> groups(256);
        socklen_t glen = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
        if (::getsockopt(connection_fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen) == 0) {
            groups.resize(glen / sizeof(gid_t));
            for (gid_t g : groups)
                if (g == *gid) {
                    check.allowed = true;
                    return check;
                }
        }
    }
    check.refusal = "permission denied: uid " + std::to_string(cred.uid) +
                    " may not use xen-dumpd (only root" + (group.empty() ? std::string() : " or group " + group) + ")";
    return check;
}

ControlServer::ControlServer(std::unique_ptr<ControlListener> listener, const std::string& group, Handler handler,
                             ControlServerLimits limits)
    : listener_(std::move(listener)), group_(group), gid_(group_id(group)), handler_(std::move(handler)),
      limits_(limits) {
    uint64_t half = descriptors_left() / 2;
    limits_.max_connections = static_cast<unsigned>(std::clamp<uint64_t>(half, 1, std::max(limits_.max_connections, 1u)));
    wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) throw_errno("eventfd");
    acceptor_ = std::thread([this] { accept_loop(); });
}

ControlServer::~ControlServer() { stop(); }

ControlServer::Stats ControlServer::stats() const {
    std::lock_guard lock(mutex_);
    Stats s = stats_;
    s.active = static_cast<unsigned>(std::count_if(connections_.begin(), connections_.end(),
                                                   [](const Connection& c) { return !c.done; }));
    return s;
}

void ControlServer::reap_unlocked() {
    for (auto it = connections_.begin(); it != connections_.end();) {
        if (it->done) {
            it->thread.join();  // it only has its descriptor left to close
            it = connections_.erase(it);
        } else {
            ++it;
        }
    }
}

void ControlServer::accept_loop() {
    while (!stopping_) {
        size_t active;
        {
            std::lock_guard lock(mutex_);
            reap_unlocked();
            active = connections_.size();
        }
        auto now = std::chrono::steady_clock::now();
        bool paused = now < paused_until_;
        // At the limit, or out of descriptors, the socket is not polled:
        // clients wait in the backlog and nothing spins.
        bool listen = !paused && active < limits_.max_connections;
        std::vector<pollfd> fds{{wake_.get(), POLLIN, 0}, {listen ? listener_->fd() : -1, POLLIN, 0}};
        auto wake_at = paused ? paused_until_ : std::chrono::steady_clock::time_point::max();
        for (const auto& r : refused_) {
            fds.push_back({r.fd.get(), POLLIN | POLLRDHUP, 0});
            wake_at = std::min(wake_at, r.until);
        }
        int timeout_ms = -1;
        if (wake_at != std::chrono::steady_clock::time_point::max())
            timeout_ms = static_cast<int>(
                std::max<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - now).count() + 1, 0));
        int r = ::poll(fds.data(), fds.size(), timeout_ms);
        {
            std::lock_guard lock(mutex_);
            ++stats_.wakeups;
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            log_message(LogLevel::error, std::string("control socket: poll failed: ") + std::strerror(errno));
            paused_until_ = std::chrono::steady_clock::now() + limits_.exhausted_pause;
            continue;
        }
        if (fds[0].revents & POLLIN) {
            uint64_t n;
            (void)!::read(wake_.get(), &n, sizeof n);
        }
        if (stopping_) break;
        drain_refused(fds);
        if (listen && (fds[1].revents & POLLIN)) {
            try {
                accept_one();
            } catch (const std::exception& e) {
                log_message(LogLevel::error, std::string("control socket: ") + e.what());
            }
        }
    }
}

void ControlServer::drain_refused(const std::vector<pollfd>& fds) {
    // A refused peer keeps its connection until it hangs up or for a
    // second, so that it can still send its request and read the refusal;
    // what it sends is discarded here, without a thread.
    auto now = std::chrono::steady_clock::now();
    std::deque<Refused> keep;
    for (size_t i = 0; i < refused_.size(); ++i) {
        short ev = fds[2 + i].revents;
        bool gone = (ev & (POLLHUP | POLLRDHUP | POLLERR)) || now >= refused_[i].until;
        if (!gone && (ev & POLLIN)) {
            char buf[4096];
            gone = ::recv(refused_[i].fd.get(), buf, sizeof buf, MSG_DONTWAIT) == 0;
        }
        if (!gone) keep.push_back(std::move(refused_[i]));
    }
    refused_.swap(keep);
}

void ControlServer::note_refusal(const PeerCheck& peer) {
    // A flood of refused peers must not flood the journal: one line a second.
    auto now = std::chrono::steady_clock::now();
    if (now - last_refusal_log_ < std::chrono::seconds(1)) {
        ++refusals_not_logged_;
        return;
    }
    std::string more = refusals_not_logged_
                           ? " (and " + std::to_string(refusals_not_logged_) + " more refused since the last such line)"
                           : std::string();
    log_message(LogLevel::warning,
                "refused a request from uid " + std::to_string(peer.uid) + " (pid " + std::to_string(peer.pid) + ")" +
                    more,
                {{"REQUEST_UID", std::to_string(peer.uid)}, {"REQUEST_PID", std::to_string(peer.pid)}});
    last_refusal_log_ = now;
    refusals_not_logged_ = 0;
}

void ControlServer::accept_one() {
    int error = 0;
    UniqueFd fd = listener_->accept(&error);
    if (!fd) {
        if (!out_of_descriptors(error)) return;  // EAGAIN, or a client that already left
        bool first;
        {
            std::lock_guard lock(mutex_);
            first = stats_.accept_failures++ == 0;
        }
        if (first || std::chrono::steady_clock::now() - paused_until_ > std::chrono::seconds(10))
            log_message(LogLevel::error, std::string("control socket: cannot accept: ") + std::strerror(error) +
                                             "; not accepting for " + std::to_string(limits_.exhausted_pause.count()) +
                                             " ms");
        paused_until_ = std::chrono::steady_clock::now() + limits_.exhausted_pause;
        return;
    }
    PeerCheck peer = check_peer(fd.get(), gid_, group_);
    if (!peer.allowed) {
        note_refusal(peer);
        send_and_forget(fd.get(), control_error("permission", peer.refusal));
        ::shutdown(fd.get(), SHUT_WR);
        if (refused_.size() >= limits_.max_connections) refused_.pop_front();  // the oldest goes now
        refused_.push_back({std::move(fd), std::chrono::steady_clock::now() + std::chrono::seconds(1)});
        std::lock_guard lock(mutex_);
        ++stats_.refused;
        return;
    }
    // A client that stops reading its replies is dropped after the idle limit.
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(limits_.idle_timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>(limits_.idle_timeout.count() % 1000 * 1000);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

    int raw = fd.get();
    auto conn = std::make_shared<JsonLineConnection>(std::move(fd));
    std::lock_guard lock(mutex_);
    auto it = connections_.emplace(connections_.end());
    it->fd = raw;
    try {
        it->thread = std::thread([this, it, conn, peer] {
            serve(*conn, peer);
            {
                std::lock_guard done_lock(mutex_);
                it->done = true;  // from here on stop() leaves the descriptor alone
            }
            wake(wake_.get());
        });
    } catch (const std::system_error& e) {
        connections_.erase(it);
        ++stats_.accept_failures;
        paused_until_ = std::chrono::steady_clock::now() + limits_.exhausted_pause;
        send_and_forget(raw, control_error("busy", std::string("the service cannot take the request now: ") + e.what()));
        log_message(LogLevel::error, std::string("control socket: cannot start a thread: ") + e.what());
        return;
    }
    ++stats_.accepted;
}

void ControlServer::serve(JsonLineConnection& conn, const PeerCheck& peer) {
    try {
        std::optional<std::string> line;
        try {
            line = conn.receive_line(limits_.idle_timeout);
        } catch (const Error& e) {
            conn.send(control_error("request", e.what()));  // too long; nobody hears it when the peer left
            return;
        }
        if (!line) {
            conn.send(control_error("request", "no request within " + std::to_string(limits_.idle_timeout.count()) +
                                                   " ms; closing"));
            return;
        }
        nlohmann::json request;
        try {
            request = parse_control_message(*line);
        } catch (const Error& e) {
            conn.send(control_error("request", e.what()));
            return;
        }
        try {
            handler_(conn, peer, request);
        } catch (const nlohmann::json::exception& e) {
            conn.send(control_error("request", std::string("bad request: ") + e.what()));
        }
    } catch (const std::exception&) {
        // The peer went away: nothing more to tell it.
    }
}

void ControlServer::close_listener() {
    if (stopping_.exchange(true)) return;
    wake(wake_.get());
    if (acceptor_.joinable()) acceptor_.join();
    listener_.reset();  // removes the socket: no new clients
}

void ControlServer::stop() {
    close_listener();
    {
        std::lock_guard lock(mutex_);
        for (auto& c : connections_)
            if (!c.done) ::shutdown(c.fd, SHUT_RDWR);
    }
    // Only this thread changes the list now; the threads mark themselves done.
    for (auto& c : connections_)
        if (c.thread.joinable()) c.thread.join();
    connections_.clear();
}

}  // namespace xendump::daemon
