// Helpers shared by the test suites: temporary directories, running programs
// of the build tree, a PageSource over in-memory pages.
#pragma once

#include <elf.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/zero_copy_source.hpp"
#include "xendump/page_source.hpp"

namespace xendump::test {

// An ELF64 little-endian ET_CORE header for `machine`, its sizes filled in
// (e_phoff, counts and the section fields left to the caller).
Elf64_Ehdr core_elf_header(uint16_t machine);

// A fresh directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
public:
    TempDir();  // under $TMPDIR, else /tmp
    explicit TempDir(const std::filesystem::path& base);
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

struct RunResult {
    int exit_code = -1;       // -signal when killed by a signal
    std::string out;
    std::string err;
    long max_rss_kib = -1;    // peak resident set of the program (wait4's rusage)
};

// Runs `argv` (argv[0] resolved via build_program() when it names one of the
// project's programs), captures stdout and stderr.
RunResult run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});

// Path of a program built in this tree, e.g. "xen-dumpctl".
std::filesystem::path build_program(const std::string& name);
std::filesystem::path shared_dir();     // ../shared
std::filesystem::path source_root();

// What the bash completion of `program` (completions/PROGRAM) offers for the
// command line `words`, whose last word is the one being completed (bash's
// own word splitting at '=' and ':' is the caller's: {"DOMAIN", "=", "w"}).
// The project's programs are first in PATH; `env` as for run().
std::vector<std::string> bash_completion(const std::string& program, const std::vector<std::string>& words,
                                         const std::vector<std::string>& env = {});

// The bytes of a file (empty when it cannot be read).
std::vector<std::byte> slurp(const std::filesystem::path& p);
// The same as text.
std::string slurp_text(const std::filesystem::path& p);
// Pages of `path` in [offset, offset + size) held in the page cache
// (mincore): after a POSIX_FADV_DONTNEED of the file, the pages read since.
uint64_t cached_pages(const std::filesystem::path& path, uint64_t offset, uint64_t size);

// What `write(fd)` writes into a real pipe, drained by a reader thread (the
// writer sees a pipe, not a file); `fd` is closed after write() returns or
// throws (the error then goes on).
std::vector<std::byte> through_pipe(const std::function<void(int fd)>& write);

// While it lives, this process may not make a file larger than `bytes`
// (RLIMIT_FSIZE; SIGXFSZ ignored): a write that crosses the limit is cut
// short there and the next one fails with EFBIG, the way a full quota
// stops a dump part way. Restores the limit and the signal's action.
class FileSizeLimit {
public:
    explicit FileSizeLimit(uint64_t bytes);
    ~FileSizeLimit();
    FileSizeLimit(const FileSizeLimit&) = delete;
    FileSizeLimit& operator=(const FileSizeLimit&) = delete;

private:
    uint64_t old_soft_, old_hard_;
    void (*old_handler_)(int);
};

// Sets an environment variable while it lives, then restores it.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        ::setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

// Deterministic page contents for synthetic sources.
void fill_pattern_page(uint64_t seed, uint64_t pfn, std::byte* page);

// A PageSource over pages generated from (seed, pfn); zero_pfns read as zeros.
class PatternPageSource : public ZeroCopySource {  // FileBackedSource (tests/format) adds a file range
public:
    PatternPageSource(std::vector<PageEntry> entries, uint64_t seed = 1);
    std::span<const PageEntry> entries() const override { return entries_; }
    void read_pages(size_t first, size_t count, std::span<std::byte> out,
                    std::span<uint8_t> unreadable) override;
    std::vector<uint64_t> zero_pfns;        // sorted
    std::vector<uint64_t> unreadable_pfns;  // sorted; read as unreadable

private:
    std::vector<PageEntry> entries_;
    uint64_t seed_;
};

}  // namespace xendump::test
