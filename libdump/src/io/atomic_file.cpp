// AtomicFile: a file that only ever appears complete under its final name.
// O_TMPFILE gives an inode without a name, so a crash or kill -9 before
// commit() leaves nothing behind; linkat() publishes it and fails with EEXIST
// rather than replacing an existing file. Filesystems without O_TMPFILE get a
// hidden temporary opened O_EXCL, published with link() (also never replaces).
#include "xendump/fd.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <future>

#include "xendump/error.hpp"

namespace xendump {

namespace {

std::filesystem::path directory_of(const std::filesystem::path& p) {
    auto dir = p.parent_path();
    return dir.empty() ? std::filesystem::path(".") : dir;
}

void fsync_directory(const std::filesystem::path& dir) {
    UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dfd) throw_errno("cannot open directory for fsync", dir.string());
    if (::fsync(dfd.get()) != 0) throw_errno("cannot fsync directory", dir.string());
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path final_path, unsigned mode) : final_(std::move(final_path)) {
    if (final_.filename().empty()) throw Error("not a file name", final_.string());
    const auto dir = directory_of(final_);
    // Refuse early (commit() checks again, race-free) so a long dump is not
    // written only to be thrown away.
    struct stat st {};
    if (::lstat(final_.c_str(), &st) == 0) throw Error("file exists", final_.string(), std::nullopt, EEXIST);

    fd_.reset(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, mode));
    if (fd_) return;
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT)
        throw_errno("cannot create temporary file", dir.string());

    std::string tmpl = (dir / (std::string(kTempPrefix) + final_.filename().string() + ".XXXXXX")).string();
    int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
    if (fd < 0) throw_errno("cannot create temporary file", tmpl);
    fd_.reset(fd);
    temp_ = tmpl;
    if (::fchmod(fd, mode) != 0) {
        int e = errno;
        ::unlink(temp_.c_str());
        throw Error("cannot set mode of temporary file", temp_.string(), std::nullopt, e);
    }
}

AtomicFile::~AtomicFile() {
    if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::commit(const std::function<void(const std::filesystem::path&)>& check) {
    if (committed_) return;
    // An O_TMPFILE has no name; /proc/self/fd reopens and links it.
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_.get());
    const std::filesystem::path readable = temp_.empty() ? std::filesystem::path(proc) : temp_;
    // Without /proc an unnamed file cannot be reopened: checked once published.
    const bool check_first = check && ::access(readable.c_str(), R_OK) == 0;
    if (check_first) {
        auto checked = std::async(std::launch::async, [&] { check(readable); });
        const int rc = ::fsync(fd_.get());
        const int err = errno;
        checked.get();  // the check's exception first: it says more than fsync
        if (rc != 0) throw Error("cannot fsync", final_.string(), std::nullopt, err);
        // Pages the check dropped while they were still being written back.
        ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_DONTNEED);
    } else if (::fsync(fd_.get()) != 0) {
        throw_errno("cannot fsync", final_.string());
    }
    if (temp_.empty()) {
        // linkat through /proc/self/fd works without CAP_DAC_READ_SEARCH
        // (AT_EMPTY_PATH needs it); both refuse to replace an existing name.
        if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, final_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
            if (errno == EEXIST) throw Error("file exists", final_.string(), std::nullopt, EEXIST);
            if (::linkat(fd_.get(), "", AT_FDCWD, final_.c_str(), AT_EMPTY_PATH) != 0)
                throw_errno("cannot publish file", final_.string());
        }
    } else {
        if (::link(temp_.c_str(), final_.c_str()) != 0) {
            if (errno == EEXIST) throw Error("file exists", final_.string(), std::nullopt, EEXIST);
            // Filesystems without hard links: renameat2 without replacing.
            if (::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, final_.c_str(), RENAME_NOREPLACE) != 0)
                throw_errno("cannot publish file", final_.string());
        } else {
            ::unlink(temp_.c_str());
        }
        temp_.clear();
    }
    committed_ = true;
    fsync_directory(directory_of(final_));
    if (check && !check_first) {
        try {
            check(final_);
        } catch (...) {
            ::unlink(final_.c_str());  // never leave a file that failed its check
            throw;
        }
    }
}

}  // namespace xendump
