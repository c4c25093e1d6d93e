#include "test_support.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "sim/pattern.hpp"
#include "util/util.hpp"

extern char** environ;

namespace xendump::test {

Elf64_Ehdr core_elf_header(uint16_t machine) {
    Elf64_Ehdr eh = util::core_elf_header(machine);
    eh.e_shentsize = sizeof(Elf64_Shdr);
    return eh;
}

namespace fs = std::filesystem;

std::string slurp_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint64_t cached_pages(const std::filesystem::path& path, uint64_t offset, uint64_t size) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot open " + path.string());
    const auto len = static_cast<size_t>(std::filesystem::file_size(path));
    void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) throw std::runtime_error("cannot map " + path.string());
    std::vector<unsigned char> in_core((len + 4095) / 4096);
    const int r = ::mincore(m, len, in_core.data());
    ::munmap(m, len);
    if (r != 0) throw std::runtime_error("mincore failed on " + path.string());
    uint64_t n = 0;
    for (uint64_t p = offset / 4096; p < (offset + size) / 4096; ++p) n += in_core[p] & 1;
    return n;
}

std::vector<std::byte> slurp(const fs::path& p) {
    const std::string s = slurp_text(p);
    std::vector<std::byte> out(s.size());
    if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());  // an empty vector's data() may be null
    return out;
}

std::vector<std::byte> through_pipe(const std::function<void(int fd)>& write) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    std::vector<std::byte> got;
    std::thread reader([&] {
        std::byte buf[65536];
        for (;;) {
            const ssize_t n = ::read(p[0], buf, sizeof buf);
            if (n <= 0) break;
            got.insert(got.end(), buf, buf + n);
        }
    });
    auto done = [&] {
        ::close(p[1]);
        reader.join();
        ::close(p[0]);
    };
    try {
        write(p[1]);
    } catch (...) {
        done();
        throw;
    }
    done();
    return got;
}

TempDir::TempDir() : TempDir([] {
    const char* base = std::getenv("TMPDIR");
    return fs::path(base && *base ? base : "/tmp");
}()) {}

TempDir::TempDir(const fs::path& base) {
    std::string tmpl = (base / "xendump-test.XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed in " + base.string());
    path_ = tmpl;
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

fs::path source_root() { return XENDUMP_SOURCE_ROOT; }

std::vector<std::string> bash_completion(const std::string& program, const std::vector<std::string>& words,
                                         const std::vector<std::string>& env_in) {
    std::string fn = "_" + program;
    std::replace(fn.begin(), fn.end(), '-', '_');
    // The words as bash array elements, each single-quoted.
    std::string array;
    for (const auto& w : words) {
        std::string q = "'";
        for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        array += q + "' ";
    }
    std::string path;
    for (const char* sub : {"ctl", "sim", "convert", "daemon"}) path += (fs::path(XENDUMP_BUILD_ROOT) / sub).string() + ":";
    std::vector<std::string> env = {"PATH=" + path + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin")};
    env.insert(env.end(), env_in.begin(), env_in.end());
    // compopt works only inside a completion that bash runs: a no-op here.
    auto r = run({"bash", "-c",
                  "compopt() { :; }; source \"$0\" && COMP_WORDS=(" + array + "); COMP_CWORD=" +
                      std::to_string(words.size() - 1) + "; " + fn + "; printf '%s\\n' \"${COMPREPLY[@]}\"",
                  (source_root() / "completions" / program).string()},
                 env);
    if (r.exit_code != 0) throw std::runtime_error("completion of " + program + " failed: " + r.err);
    std::vector<std::string> out;
    std::istringstream in(r.out);
    for (std::string w; std::getline(in, w);)
        if (!w.empty()) out.push_back(w);
    return out;
}
fs::path shared_dir() { return XENDUMP_SHARED_DIR; }

fs::path build_program(const std::string& name) {
    for (const char* sub : {"ctl", "sim", "convert", "daemon", "bench"}) {
        fs::path p = fs::path(XENDUMP_BUILD_ROOT) / sub / name;
        if (fs::exists(p)) return p;
    }
    return name;
}

RunResult run(const std::vector<std::string>& argv_in, const std::vector<std::string>& env) {
    std::vector<std::string> args = argv_in;
    if (!args.empty() && args[0].find('/') == std::string::npos) args[0] = build_program(args[0]).string();
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::vector<std::string> envs;
    for (char** e = environ; *e; ++e) envs.emplace_back(*e);
    for (const auto& kv : env) {
        auto key = kv.substr(0, kv.find('=') + 1);
        std::erase_if(envs, [&](const std::string& s) { return s.rfind(key, 0) == 0; });
        envs.push_back(kv);
    }
    std::vector<char*> cenv;
    for (auto& e : envs) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    pid_t pid;
    int rc = posix_spawnp(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&fa);
    close(out_pipe[1]);
    close(err_pipe[1]);
    RunResult r;
    if (rc != 0) {
        close(out_pipe[0]);
        close(err_pipe[0]);
        r.err = std::string("spawn failed: ") + std::strerror(rc);
        return r;
    }
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    int open_fds = 2;
    char buf[65536];
    while (open_fds > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            } else {
                (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
            }
        }
    }
    int status = 0;
    struct rusage ru {};
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    r.max_rss_kib = ru.ru_maxrss;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return r;
}

void fill_pattern_page(uint64_t seed, uint64_t pfn, std::byte* page) {
    // The simulated host's pattern (seed = domid), so expected pages come
    // from the same definition the host uses.
    if (seed > UINT32_MAX) throw std::invalid_argument("pattern seed above 32 bits");
    sim::fill_pattern_page(static_cast<uint32_t>(seed), pfn, page);
}

PatternPageSource::PatternPageSource(std::vector<PageEntry> entries, uint64_t seed)
    : entries_(std::move(entries)), seed_(seed) {}

void PatternPageSource::read_pages(size_t first, size_t count, std::span<std::byte> out,
                                   std::span<uint8_t> unreadable) {
    for (size_t i = 0; i < count; ++i) {
        uint64_t pfn = entries_[first + i].pfn;
        std::byte* page = out.data() + i * 4096;
        unreadable[i] = 0;
        if (std::binary_search(unreadable_pfns.begin(), unreadable_pfns.end(), pfn)) {
            std::memset(page, 0, 4096);
            unreadable[i] = 1;
        } else if (std::binary_search(zero_pfns.begin(), zero_pfns.end(), pfn)) {
            std::memset(page, 0, 4096);
        } else {
            fill_pattern_page(seed_, pfn, page);
        }
    }
}

FileSizeLimit::FileSizeLimit(uint64_t bytes) {
    rlimit old{};
    if (::getrlimit(RLIMIT_FSIZE, &old) != 0) throw std::runtime_error("getrlimit");
    old_soft_ = old.rlim_cur;
    old_hard_ = old.rlim_max;
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit lower{static_cast<rlim_t>(bytes), old.rlim_max};
    if (::setrlimit(RLIMIT_FSIZE, &lower) != 0) throw std::runtime_error("setrlimit");
}

FileSizeLimit::~FileSizeLimit() {
    rlimit old{static_cast<rlim_t>(old_soft_), static_cast<rlim_t>(old_hard_)};
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler_);
}

}  // namespace xendump::test
