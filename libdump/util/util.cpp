#include "util/util.hpp"

#include <sys/stat.h>
#include <unistd.h>

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

void write_all(int fd, const void* data, size_t size, const std::string& file) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = retry_eintr([&] { return ::write(fd, p, size); });
        if (n < 0) throw_errno("cannot write", file);
        p += n;
        size -= static_cast<size_t>(n);
    }
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
