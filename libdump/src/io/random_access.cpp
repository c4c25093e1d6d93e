#include "io/random_access.hpp"

#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::io {

size_t FdRandomAccess::read_at(uint64_t offset, std::span<std::byte> out) const {
    const long n = util::pread_full(fd_, out.data(), out.size(), offset);
    if (n < 0) throw_errno("cannot read", name_, offset);
    return static_cast<size_t>(n);
}

}  // namespace xendump::io
