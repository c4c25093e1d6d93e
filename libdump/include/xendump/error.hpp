// One error type for the whole library: what failed, in which file or domain,
// and where (a file offset, a pfn, an mfn...). Nothing in libdump calls exit().
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace xendump {

class Error : public std::runtime_error {
public:
    // `object` names the file (path) or domain ("domain 7") the error is about;
    // `offset`, when known, is the file offset of the structure that failed.
    Error(std::string message, std::string object = {}, std::optional<uint64_t> offset = std::nullopt,
          int sys_errno = 0);

    const std::string& message() const noexcept { return message_; }
    const std::string& object() const noexcept { return object_; }
    std::optional<uint64_t> offset() const noexcept { return offset_; }
    int sys_errno() const noexcept { return errno_; }

    // Returns a copy with `object` filled in when it was empty (used when a
    // lower layer did not know the file name).
    Error with_object(const std::string& object) const;

private:
    static std::string format(const std::string& message, const std::string& object,
                              std::optional<uint64_t> offset, int sys_errno);
    std::string message_;
    std::string object_;
    std::optional<uint64_t> offset_;
    int errno_;
};

// Throws Error with strerror(errno) appended.
[[noreturn]] void throw_errno(const std::string& what, const std::string& object = {},
                              std::optional<uint64_t> offset = std::nullopt);

}  // namespace xendump
