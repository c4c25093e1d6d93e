#include "io/temp_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "xendump/error.hpp"

namespace xendump::io {

UnnamedTempFile unnamed_temp_file(const std::string& what, const std::string& dir) {
    UnnamedTempFile f;
    const char* env = std::getenv("TMPDIR");
    f.dir = !dir.empty() ? dir : env && *env ? env : "/var/tmp";
    f.fd.reset(::open(f.dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (!f.fd && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        std::string name = f.dir + "/.xendump-tmp.XXXXXX";
        f.fd.reset(::mkostemp(name.data(), O_CLOEXEC));
        if (f.fd) ::unlink(name.c_str());
    }
    if (!f.fd) throw_errno("cannot create a temporary file for " + what +
                                (dir.empty() ? " (set TMPDIR to a writable directory)" : ""),
                            f.dir);
    return f;
}

}  // namespace xendump::io
