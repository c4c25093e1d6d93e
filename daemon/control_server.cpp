#include "control_server.hpp"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "control_protocol.hpp"
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
    // A socket file left by a killed service is stale; one that answers is not.
    if (std::filesystem::exists(std::filesystem::symlink_status(path_, ec))) {
        if (connect_control(path_)) throw Error("another xen-dumpd is already listening", path_.string());
        std::filesystem::remove(path_, ec);
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

UniqueFd ControlListener::accept() {
    return UniqueFd(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
}

PeerCheck check_peer(int connection_fd, const std::string& group) {
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
    if (auto gid = group_id(group)) {
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

}  // namespace xendump::daemon
