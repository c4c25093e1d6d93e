#include "util/util.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "xendump/error.hpp"

namespace xendump::util {

Elf64_Ehdr core_elf_header(uint16_t machine) {
    Elf64_Ehdr eh{};
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
    eh.e_type = ET_CORE;
    eh.e_machine = machine;
    eh.e_version = EV_CURRENT;
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    return eh;
}

std::string hex(uint64_t value) { return hex(value, 0); }

std::string hex(uint64_t value, int digits) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(value));
    return buf;
}

std::string utc_time(std::time_t t, const char* format) {
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    const size_t n = std::strftime(buf, sizeof buf, format, &tm);
    return std::string(buf, n);
}

std::string utc_time(std::chrono::system_clock::time_point t, const char* format) {
    return utc_time(std::chrono::system_clock::to_time_t(t), format);
}

const char* file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFLNK: return "a symbolic link";
    }
    return "of an unknown kind";
}

namespace {
// Calls `write_at(bytes, count, done)` until `size` bytes are written; the
// bytes written, fewer when a call failed (errno set) or took nothing (EIO).
template <class WriteAt>
size_t write_loop(const void* data, size_t size, WriteAt&& write_at) {
    const char* p = static_cast<const char*>(data);
    size_t done = 0;
    while (done < size) {
        const ssize_t n = retry_eintr([&] { return write_at(p + done, size - done, done); });
        if (n < 0) return done;
        if (n == 0) {
            errno = EIO;
            return done;
        }
        done += static_cast<size_t>(n);
    }
    return done;
}
}  // namespace

size_t write_full(int fd, const void* data, size_t size) {
    return write_loop(data, size, [fd](const char* p, size_t n, size_t) { return ::write(fd, p, n); });
}

size_t pwrite_full(int fd, const void* data, size_t size, uint64_t offset) {
    return write_loop(data, size, [fd, offset](const char* p, size_t n, size_t done) {
        return ::pwrite(fd, p, n, static_cast<off_t>(offset + done));
    });
}

void write_all(int fd, const void* data, size_t size, const std::string& file) {
    if (write_full(fd, data, size) != size) throw_errno("cannot write", file);
}

long pread_full(int fd, void* out, size_t size, uint64_t offset) {
    char* p = static_cast<char*>(out);
    size_t done = 0;
    while (done < size) {
        const ssize_t n =
            retry_eintr([&] { return ::pread(fd, p + done, size - done, static_cast<off_t>(offset + done)); });
        if (n < 0) return -1;
        if (n == 0) break;
        done += static_cast<size_t>(n);
    }
    return static_cast<long>(done);
}

}  // namespace xendump::util
