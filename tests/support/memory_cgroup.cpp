#include "memory_cgroup.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace xendump::test {

namespace fs = std::filesystem;

namespace {

// The process's group in a hierarchy: "memory" (v1) or "" (v2), from /proc/self/cgroup.
std::string own_group(const std::string& controller) {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        const auto a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string list = line.substr(a + 1, b - a - 1);
        std::stringstream ss(list);
        std::string c;
        bool match = controller.empty() ? list.empty() : false;
        while (!controller.empty() && std::getline(ss, c, ','))
            if (c == controller) match = true;
        if (match) return line.substr(b + 1);
    }
    return {};
}

bool write_text(const fs::path& p, const std::string& text) {
    std::ofstream out(p);
    out << text;
    out.flush();
    return static_cast<bool>(out);
}

uint64_t keyed_value(const fs::path& p, const std::string& key) {
    std::ifstream in(p);
    std::string k;
    uint64_t v;
    while (in >> k >> v)
        if (k == key) return v;
    return 0;
}

}  // namespace

std::unique_ptr<MemoryCgroup> MemoryCgroup::create(uint64_t limit, std::string& why) {
    const std::string name = "xendump-test-" + std::to_string(::getpid());
    const std::string v1_group = own_group("memory");
    const fs::path v1_root = "/sys/fs/cgroup/memory";
    std::error_code ec;
    if (!v1_group.empty() && fs::exists(v1_root / "memory.limit_in_bytes", ec)) {
        const fs::path dir = v1_root / fs::path(v1_group).relative_path() / name;
        if (fs::create_directory(dir, ec)) {
            if (write_text(dir / "memory.limit_in_bytes", std::to_string(limit)))
                return std::unique_ptr<MemoryCgroup>(new MemoryCgroup(dir, false));
            fs::remove(dir, ec);
        }
        why = "cgroup v1 memory: cannot create " + dir.string() + " with a limit (" + ec.message() + ")";
    }
    const std::string v2_group = own_group("");
    for (const fs::path& root : {fs::path("/sys/fs/cgroup"), fs::path("/sys/fs/cgroup/unified")}) {
        const fs::path parent = root / fs::path(v2_group).relative_path();
        std::ifstream ctl(parent / "cgroup.subtree_control");
        std::string controllers((std::istreambuf_iterator<char>(ctl)), std::istreambuf_iterator<char>());
        if (!fs::exists(root / "cgroup.controllers", ec) || controllers.find("memory") == std::string::npos) continue;
        const fs::path dir = parent / name;
        if (fs::create_directory(dir, ec)) {
            if (write_text(dir / "memory.max", std::to_string(limit)) && write_text(dir / "memory.swap.max", "0"))
                return std::unique_ptr<MemoryCgroup>(new MemoryCgroup(dir, true));
            fs::remove(dir, ec);
        }
        why += (why.empty() ? "" : "; ") + std::string("cgroup v2: cannot create ") + dir.string() + " with a limit";
    }
    if (why.empty())
        why = "no writable memory cgroup: the process is in no cgroup v1 memory group and no cgroup v2 hierarchy "
              "delegates the memory controller";
    return nullptr;
}

MemoryCgroup::~MemoryCgroup() {
    // The programs have exited; an empty group is removed with rmdir.
    ::rmdir(dir_.c_str());
}

uint64_t MemoryCgroup::oom_kills() const {
    return v2_ ? keyed_value(dir_ / "memory.events", "oom_kill") : keyed_value(dir_ / "memory.oom_control", "oom_kill");
}

RunResult MemoryCgroup::run_limited(const std::vector<std::string>& argv) const {
    std::vector<std::string> args = {"/bin/sh", "-c", "echo $$ > \"$0\" && exec \"$@\"",
                                     (dir_ / "cgroup.procs").string()};
    for (size_t i = 0; i < argv.size(); ++i)
        args.push_back(i == 0 && argv[0].find('/') == std::string::npos ? build_program(argv[0]).string() : argv[i]);
    return run(args);
}

}  // namespace xendump::test
