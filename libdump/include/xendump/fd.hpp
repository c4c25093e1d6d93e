// RAII for file descriptors and atomic publication of files.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <utility>

namespace xendump {

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    UniqueFd& operator=(UniqueFd&& o) noexcept {
        if (this != &o) reset(std::exchange(o.fd_, -1));
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd() { reset(); }

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd = -1) noexcept;

private:
    int fd_ = -1;
};

// A file that appears under its final name only when commit() succeeds:
// O_TMPFILE in the target directory (fallback: hidden ".xendump-tmp.NAME.XXXXXX" opened
// O_EXCL), fsync, linkat/rename without replacing, fsync of the directory.
// The destructor removes the temporary if commit() was not reached.
class AtomicFile {
public:
    explicit AtomicFile(std::filesystem::path final_path, unsigned mode = 0600);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    int fd() const noexcept { return fd_.get(); }
    const std::filesystem::path& path() const noexcept { return final_; }
    // Publishes the file. Throws Error if the final name exists. A `check`
    // reads the finished file (through the path it is given) while fsync
    // makes it durable, on another thread; if it throws, nothing is
    // published and the exception is rethrown. (Where an unnamed O_TMPFILE
    // cannot be reopened, without /proc, the check reads the published file
    // and a rejected one is removed.)
    void commit(const std::function<void(const std::filesystem::path&)>& check = {});

    // Prefix of the fallback hidden temporaries, so cleaners can find leftovers.
    static constexpr const char* kTempPrefix = ".xendump-tmp.";

private:
    std::filesystem::path final_;
    std::filesystem::path temp_;  // empty when O_TMPFILE was used
    UniqueFd fd_;
    bool committed_ = false;
};

}  // namespace xendump
