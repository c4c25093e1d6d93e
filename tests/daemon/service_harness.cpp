#include "service_harness.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
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
        spec["domains"].push_back({{"domid", d.domid},
                                   {"name", d.name},
                                   {"uuid", d.uuid},
                                   {"type", "pv"},
                                   {"guest_width", 8},
                                   {"vcpus", 1},
                                   {"p2m_size", d.pages},
                                   {"p2m_format", "tree"},
                                   {"extents", {{0, 0x100000 * uint64_t{d.domid}, d.pages}}},
                                   {"p2m_pages_at", nullptr},
                                   {"memory", {{"fill", "pattern"}}},
                                   {"state", "running"},
                                   {"map_cost", {{"per_call_us", 0}, {"per_page_ns", d.per_page_ns}}}});
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
std::vector<fs::path> sidecars_in(const fs::path& dir) { return files_ending(dir, ".core.json", false); }
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
    if (pid_ > 0) kill_hard();
    if (notify_fd_ >= 0) ::close(notify_fd_);
}

std::vector<std::string> ServiceProcess::common_args() const {
    return {"--config", config_.string(), "--socket", socket_.string(), "--dump-dir", dump_dir_.string(),
            "--host", "sim:" + host_.string()};
}

void ServiceProcess::start() {
    received_.clear();
    std::vector<std::string> argv{build_program("xen-dumpd").string()};
    auto common = common_args();
    argv.insert(argv.end(), common.begin(), common.end());
    pid_ = ::fork();
    if (pid_ == 0) {
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

std::vector<std::string> ServiceProcess::notifications() {
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

std::string ServiceProcess::log() const {
    std::ifstream in(log_);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace xendump::test
