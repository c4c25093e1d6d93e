// The simulated Xen host (simulated-host.md) kept in a directory: the host
// that open_hypervisor("sim:DIR") dumps from, driven from outside the way xl
// drives Xen (crash a guest, pause it, balloon it). Any number of processes
// may open the same directory; every change is seen by all at once. The
// program xen-dump-sim is this class and a command line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xendump/hypervisor.hpp"

namespace xendump {

class SimulatedHost {
public:
    // Builds a host in `dir` (which must not exist or be empty) from a JSON
    // spec file (simulated-host.md). Throws Error naming the file.
    static void create(const std::filesystem::path& dir, const std::filesystem::path& spec_file);
    // Adds the domains of another spec file to the host in `dir` (new
    // domids and names, machine frames above the host's); a process that
    // has the host open sees them at its next lookup.
    static void add(const std::filesystem::path& dir, const std::filesystem::path& spec_file);

    // Opens the host in `dir`. Throws Error when it is not one.
    explicit SimulatedHost(const std::filesystem::path& dir);
    SimulatedHost(SimulatedHost&&) noexcept;
    SimulatedHost& operator=(SimulatedHost&&) noexcept;
    ~SimulatedHost();

    // Every domain the host ever had (destroyed ones included), by domid.
    std::vector<uint32_t> domids() const;
    // The domain of this name that is not destroyed; nullopt when there is none.
    std::optional<uint32_t> find_domain(std::string_view name) const;

    // The domain crashes (shutdown reason crash); watchers are told.
    void crash(uint32_t domid);
    void shutdown(uint32_t domid, ShutdownReason reason);
    void destroy(uint32_t domid);  // the domain disappears; watchers are told
    void pause(uint32_t domid);    // as xl pause
    void unpause(uint32_t domid);  // as xl unpause
    // The guest gives pfns [pfn, pfn+count) back: ~0 in its p2m, the frames no longer its own.
    void balloon(uint32_t domid, uint64_t pfn, uint64_t count);
    // The guest takes ballooned pfns [pfn, pfn+count) back: its p2m names
    // their frames again (an HVM/PVH gfn is populated again).
    void unballoon(uint32_t domid, uint64_t pfn, uint64_t count);

    // JSON text of `xen-dump-sim list --json` (every domain: domid, name,
    // type, state, nr_pages) and `info --json` (one live domain: its spec
    // with p2m_pfns, nr_pages, shared_info_mfn); `indent` as
    // nlohmann::json::dump's (-1: one line). Error for an unknown domid.
    std::string list_json(int indent = -1) const;
    std::string info_json(uint32_t domid, int indent = -1) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace xendump
