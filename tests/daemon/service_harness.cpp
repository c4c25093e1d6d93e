#include "service_harness.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace xendump::test {

namespace fs = std::filesystem;

void create_sim_host(const fs::path& dir, const std::vector<SimDomainSpec>& domains) {
    nlohmann::json spec;
    spec["xen_version"] = "4.17.0";
    spec["domains"] = nlohmann::json::array();
    for (const auto& d : domains) {
        nlohmann::json dom = {{"domid", d.domid},
                              {"name", d.name},
                              {"uuid", d.uuid},
                              {"type", d.type},
                              {"vcpus", 1},
                              {"p2m_size", d.pages},
                              {"extents", {{0, 0x100000 * uint64_t{d.domid}, d.pages}}},
                              {"memory", {{"fill", "pattern"}}},
                              {"zero_ranges", d.zero_ranges},
                              {"state", "running"},
                              {"map_cost", {{"per_call_us", d.per_call_us}, {"per_page_ns", d.per_page_ns}}}};
        if (d.writer_rate)
            dom["writer"] = {{"rate", d.writer_rate}, {"pattern", "random"}, {"first_pfn", 16},
                             {"pages", d.pages - 16}, {"seed", 1}};
        if (d.type == "pv") {
            dom["guest_width"] = 8;
            dom["p2m_format"] = "tree";
            dom["p2m_pages_at"] = nullptr;
        }
        spec["domains"].push_back(dom);
    }
    fs::path spec_file = dir.string() + ".spec.json";
    std::ofstream(spec_file) << spec.dump(2);
    auto r = run({"xen-dump-sim", "create", dir.string(), spec_file.string()});
    if (r.exit_code != 0) throw std::runtime_error("xen-dump-sim create failed: " + r.err);
}

void sim(const std::vector<std::string>& args) {
    std::vector<std::string> argv{"xen-dump-sim"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run(argv);
    if (r.exit_code != 0) throw std::runtime_error("xen-dump-sim " + args.at(0) + " failed: " + r.err);
}

std::string sim_state(const fs::path& host, uint32_t domid) {
    auto r = run({"xen-dump-sim", "list", host.string(), "--json"});
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_discarded()) return "?";
    for (const auto& d : j)
        if (d.value("domid", 0u) == domid) return d.value("state", "?");
    return "gone";
}

bool wait_until(const std::function<bool()>& pred, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return pred();
}

namespace {
std::vector<fs::path> files_ending(const fs::path& dir, const std::string& suffix, bool hidden) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        std::string n = e.path().filename().string();
        if (hidden ? n.starts_with(suffix) : (n.ends_with(suffix) && !n.starts_with("."))) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}
}  // namespace

std::vector<fs::path> dumps_in(const fs::path& dir) { return files_ending(dir, ".core", false); }
std::vector<fs::path> sidecars_in(const fs::path& dir) {
    std::vector<fs::path> out = files_ending(dir, ".core.json", false);
    for (fs::path& p : files_ending(dir, ".core.age.json", false)) out.push_back(std::move(p));
    std::sort(out.begin(), out.end());
    return out;
}
std::vector<fs::path> temporaries_in(const fs::path& dir) { return files_ending(dir, ".xendump-tmp.", true); }

ServiceProcess::ServiceProcess(const fs::path& work, const fs::path& host, const fs::path& dump_dir,
                               const std::string& config_text)
    : work_(work), host_(host), dump_dir_(dump_dir) {
    socket_ = work_ / "run" / "control.sock";
    notify_ = work_ / "notify.sock";
    log_ = work_ / "service.log";
    config_ = work_ / "xen-dumpd.conf";
    std::ofstream(config_) << config_text;
    notify_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, notify_.c_str(), sizeof addr.sun_path - 1);
    fs::remove(notify_);
    if (::bind(notify_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        throw std::runtime_error("cannot bind notify socket");
}

ServiceProcess::~ServiceProcess() {
    reader_stop_ = true;
    if (reader_.joinable()) reader_.join();
    if (pid_ > 0) kill_hard();
    if (notify_fd_ >= 0) ::close(notify_fd_);
}

std::vector<std::string> ServiceProcess::common_args() const {
    return {"--config", config_.string(), "--socket", socket_.string(), "--dump-dir", dump_dir_.string(),
            "--host", "sim:" + host_.string()};
}

void ServiceProcess::start() {
    {
        std::lock_guard lock(received_mutex_);
        received_.clear();
    }
    std::vector<std::string> argv{build_program("xen-dumpd").string()};
    auto common = args_ ? *args_ : common_args();
    argv.insert(argv.end(), common.begin(), common.end());
    pid_ = ::fork();
    if (pid_ == 0) {
        if (tasks_) tasks_->enter();
        if (nofile_) {
            rlimit rl{nofile_, nofile_};
            ::setrlimit(RLIMIT_NOFILE, &rl);
        }
        int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        ::dup2(fd, 2);
        int devnull = ::open("/dev/null", O_RDWR);
        ::dup2(devnull, 0);
        ::dup2(devnull, 1);
        ::setenv("NOTIFY_SOCKET", notify_.c_str(), 1);
        ::unsetenv("JOURNAL_STREAM");
        std::vector<char*> av;
        for (auto& a : argv) av.push_back(a.data());
        av.push_back(nullptr);
        ::execv(av[0], av.data());
        ::_exit(127);
    }
}

void ServiceProcess::keep_reading_notifications() {
    if (reader_.joinable()) return;
    reader_ = std::thread([this] {
        while (!reader_stop_) {
            notifications();
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
}

std::vector<std::string> ServiceProcess::notifications() {
    std::lock_guard lock(received_mutex_);
    char buf[4096];
    for (;;) {
        ssize_t n = ::recv(notify_fd_, buf, sizeof buf, 0);
        if (n <= 0) break;
        std::istringstream in(std::string(buf, static_cast<size_t>(n)));
        std::string line;
        while (std::getline(in, line))
            if (!line.empty()) received_.push_back(line);
    }
    return received_;
}

bool ServiceProcess::wait_ready(std::chrono::seconds timeout) {
    return wait_until(
        [&] {
            for (const auto& n : notifications())
                if (n == "READY=1") return true;
            return false;
        },
        timeout);
}

void ServiceProcess::signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
}

int ServiceProcess::stop(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    notifications();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

void ServiceProcess::kill_hard() { stop(SIGKILL); }

RunResult run_ctl(const ServiceProcess& service, std::vector<std::string> args) {
    args.insert(args.begin(), "xen-dumpctl");
    args.insert(args.end(), {"--config", service.config_file().string(), "--dump-dir", service.dump_dir().string(),
                             "--socket", service.socket().string()});
    return run(args);
}

bool ServiceProcess::running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
    pid_ = -1;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return false;
}

unsigned ServiceProcess::threads() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with("Threads:")) return static_cast<unsigned>(std::stoul(line.substr(8)));
    return 0;
}

unsigned ServiceProcess::open_fds() const {
    unsigned n = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid_) + "/fd", ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
        ++n;
    return n;
}

std::chrono::milliseconds ServiceProcess::cpu_time() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
    std::istringstream rest(text.substr(text.rfind(')') + 2));
    std::vector<std::string> f{std::istream_iterator<std::string>(rest), std::istream_iterator<std::string>()};
    if (f.size() < 13) return std::chrono::milliseconds(0);
    long ticks = ::sysconf(_SC_CLK_TCK);
    uint64_t t = std::stoull(f[11]) + std::stoull(f[12]);
    return std::chrono::milliseconds(t * 1000 / static_cast<uint64_t>(ticks));
}

TaskLimit::TaskLimit(unsigned limit) {
    std::string name = "xendump-test-" + std::to_string(::getpid());
    for (const char* base : {"/sys/fs/cgroup/pids", "/sys/fs/cgroup"}) {
        std::error_code ec;
        fs::path dir = fs::path(base) / name;
        if (!fs::create_directory(dir, ec) || !fs::exists(dir / "pids.max")) {
            fs::remove(dir, ec);
            continue;
        }
        std::ofstream(dir / "pids.max") << limit << "\n";
        std::ifstream in(dir / "pids.max");
        unsigned got = 0;
        if (in >> got && got == limit) {
            dir_ = dir;
            procs_ = (dir / "cgroup.procs").string();
            return;
        }
        fs::remove(dir, ec);
    }
}

TaskLimit::~TaskLimit() {
    if (dir_.empty()) return;
    std::error_code ec;
    for (int i = 0; i < 100 && !fs::remove(dir_, ec); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void TaskLimit::enter() const {
    int fd = ::open(procs_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[24];
    int n = std::snprintf(buf, sizeof buf, "%d\n", static_cast<int>(::getpid()));
    (void)!::write(fd, buf, static_cast<size_t>(n));
    ::close(fd);
}

SmallFilesystem::SmallFilesystem(const fs::path& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir_);
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
}

SmallFilesystem::~SmallFilesystem() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
}

void SmallFilesystem::fill() {
    int fd = ::open((dir_ / "filler").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error("cannot create the filler");
    std::string chunk(65536, 'x');
    // Big writes first, then single bytes, until not one more byte fits.
    for (size_t step : {chunk.size(), size_t{4096}, size_t{1}})
        while (::write(fd, chunk.data(), step) == static_cast<ssize_t>(step)) {
        }
    ::close(fd);
}

void SmallFilesystem::empty() { fs::remove(dir_ / "filler"); }

RawClient::RawClient(const fs::path& socket) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    xendump::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (fd && ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) conn_.emplace(std::move(fd));
}

void RawClient::send(const std::string& text) {
    if (conn_) (void)!::send(conn_->fd(), text.data(), text.size(), MSG_NOSIGNAL);
}

std::string RawClient::read_line(std::chrono::milliseconds timeout) {
    if (!conn_) return {};
    try {
        return conn_->receive_line(timeout).value_or(std::string());
    } catch (const std::exception&) {
        return {};  // the service hung up
    }
}

std::string ServiceProcess::log() const {
    std::ifstream in(log_);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool ServiceProcess::logged(const std::string& text, std::chrono::seconds timeout) const {
    return wait_until([&] { return log().find(text) != std::string::npos; }, timeout);
}

std::vector<RawClient> idle_clients(const fs::path& socket, size_t count) {
    std::vector<RawClient> idle;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until && idle.size() < count) {
        RawClient c(socket);
        if (c.connected()) idle.push_back(std::move(c));
        else std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return idle;
}

size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace xendump::test
