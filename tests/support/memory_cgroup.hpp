// A memory cgroup made by a test and removed after it (issue 19: the tools'
// memory is shown under a limit). cgroup v1's "memory" controller when the
// process is in one, else a v2 hierarchy whose cgroup.controllers has
// "memory"; a child group of the test's own group, so nothing else is
// touched. Programs join it through run_limited(): a shell writes its own pid
// into cgroup.procs and execs the program, whose peak RSS wait4 reports.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace xendump::test {

class MemoryCgroup {
public:
    // nullptr, with the reason in `why`, when no writable memory cgroup exists.
    static std::unique_ptr<MemoryCgroup> create(uint64_t limit_bytes, std::string& why);
    ~MemoryCgroup();  // rmdir (the programs run in it have exited)
    MemoryCgroup(const MemoryCgroup&) = delete;
    MemoryCgroup& operator=(const MemoryCgroup&) = delete;

    const std::filesystem::path& dir() const { return dir_; }
    bool v2() const { return v2_; }
    // OOM kills in the group so far (v1: memory.oom_control oom_kill; v2:
    // memory.events oom_kill); 0 where the kernel does not count them.
    uint64_t oom_kills() const;
    // Runs argv inside the group (see above).
    RunResult run_limited(const std::vector<std::string>& argv) const;

private:
    MemoryCgroup(std::filesystem::path dir, bool v2) : dir_(std::move(dir)), v2_(v2) {}
    std::filesystem::path dir_;
    bool v2_;
};

}  // namespace xendump::test
