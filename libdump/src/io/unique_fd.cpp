// UniqueFd: closes the descriptor it owns exactly once.
#include "xendump/fd.hpp"

#include <unistd.h>

namespace xendump {

void UniqueFd::reset(int fd) noexcept {
    if (fd_ >= 0 && fd_ != fd) {
        // close() may fail with EINTR but the descriptor is released anyway on
        // Linux; retrying could close a descriptor another thread just got.
        ::close(fd_);
    }
    fd_ = fd;
}

}  // namespace xendump
