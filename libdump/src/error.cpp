#include "xendump/error.hpp"

#include <cerrno>
#include <cstring>
#include <cstdio>

namespace xendump {

std::string Error::format(const std::string& message, const std::string& object,
                          std::optional<uint64_t> offset, int sys_errno) {
    std::string out;
    if (!object.empty()) out += object + ": ";
    if (offset) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "at offset 0x%llx: ", static_cast<unsigned long long>(*offset));
        out += buf;
    }
    out += message;
    if (sys_errno != 0) {
        out += ": ";
        out += std::strerror(sys_errno);
    }
    return out;
}

Error::Error(std::string message, std::string object, std::optional<uint64_t> offset, int sys_errno)
    : std::runtime_error(format(message, object, offset, sys_errno)),
      message_(std::move(message)),
      object_(std::move(object)),
      offset_(offset),
      errno_(sys_errno) {}

Error Error::with_object(const std::string& object) const {
    if (!object_.empty()) return *this;
    return Error(message_, object, offset_, errno_);
}

void throw_errno(const std::string& what, const std::string& object, std::optional<uint64_t> offset) {
    throw Error(what, object, offset, errno);
}

}  // namespace xendump
