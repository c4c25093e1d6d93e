// Small helpers shared by libdump and the programs (xen-dumpd, xen-dumpctl,
// xen-dump-convert): one copy each of what had been written out in many
// files. Private: not part of the public API (libxendump.so exports none of
// it); a static library that libdump and the programs link.
#pragma once

#include <elf.h>

#include <cerrno>
#include <cstddef>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>
#include <utility>

#include "xendump/format.hpp"

namespace xendump::util {

// The page size of every format this project reads or writes.
inline constexpr uint64_t kPage = format::kPageSize;

// The ELF header of a core file (xen-dump-core(5) "ELF header", and the
// vmcore xen-dumpctl debug writes): ELF64 little-endian ET_CORE for
// `machine` (EM_X86_64, EM_386 for a 32-bit PV guest), its version and
// header sizes; offsets, counts and e_shentsize (files with sections) are
// the caller's.
Elf64_Ehdr core_elf_header(uint16_t machine);

// "0x1f" (lower case, no padding), as error messages and LAYOUT= values write numbers.
std::string hex(uint64_t value);
// "0x000000000000001f": `digits` hex digits at least.
std::string hex(uint64_t value, int digits);

// `t` in UTC, formatted with strftime(3)'s `format` ("%Y-%m-%dT%H:%M:%SZ").
std::string utc_time(std::time_t t, const char* format);
std::string utc_time(std::chrono::system_clock::time_point t, const char* format);

// "a FIFO", "a directory", "a socket", ... for messages about a file of the
// wrong kind (st_mode of stat(2)).
const char* file_kind(unsigned mode);

// Writes `size` bytes to `fd` (again after a signal or a short write).
// Returns the bytes written: `size`, or fewer when a write failed, errno set
// (EIO when the file took nothing); the caller names the file and offset.
size_t write_full(int fd, const void* data, size_t size);
// The same with pwrite(2) at `offset` (the file offset is left alone).
size_t pwrite_full(int fd, const void* data, size_t size, uint64_t offset);

// write_full, or Error "cannot write" naming `file`, with the errno.
void write_all(int fd, const void* data, size_t size, const std::string& file);

// Reads `size` bytes at `offset` (again after a signal or a short read),
// fewer only at the end of the file. Returns the bytes read, or -1 with errno
// set when a read failed (the caller names the file and offset).
long pread_full(int fd, void* out, size_t size, uint64_t offset);

// Calls `call` again while it fails with EINTR (a signal arrived before
// anything was done); returns its result, errno as the call left it.
// `interrupted` runs before each new try: it may throw to give up (a sink
// that was cancelled while a write blocked).
template <class Call, class Interrupted>
auto retry_eintr(Call&& call, Interrupted&& interrupted) {
    for (;;) {
        auto r = call();
        if (!(r < 0 && errno == EINTR)) return r;
        interrupted();
    }
}
template <class Call>
auto retry_eintr(Call&& call) {
    return retry_eintr(std::forward<Call>(call), [] {});
}

}  // namespace xendump::util
