// The listening side of the control socket: created with its directory
// (0755) and mode 0660 (group ControlGroup when set), refusing to steal the
// socket of a service that still answers; and who may ask, decided from
// SO_PEERCRED/SO_PEERGROUPS: root, or a member of ControlGroup.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

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
    UniqueFd accept();  // invalid fd when nothing was pending

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

}  // namespace xendump::daemon
