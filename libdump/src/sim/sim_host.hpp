// A simulated Xen host kept in a directory (simulated-host.md): created from
// a spec by `xen-dump-sim create`, then opened by any number of processes.
// Every state change takes DIR/lock and replaces the domain's state file, so
// each process sees it at once; the sim Hypervisor backend and the
// xen-dump-sim tool both drive this class.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/host_store.hpp"
#include "sim/sim_domain.hpp"
#include "xendump/format.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump::sim {

class SimHost {
public:
    // Builds a host in `dir` (which must not exist or be empty) from a spec file.
    static void create(const std::filesystem::path& dir, const std::filesystem::path& spec_file);
    static void create(const std::filesystem::path& dir, const HostSpec& spec);
    // Adds the domains of a spec file to the host in `dir` (xen-dump-sim
    // add): their domids and live names must be new; their machine frames
    // are placed above every existing domain's. Processes that have the
    // host open see them at their next lookup.
    static void add(const std::filesystem::path& dir, const std::filesystem::path& spec_file);

    explicit SimHost(const std::filesystem::path& dir);

    const HostPaths& paths() const { return paths_; }
    const std::string& xen_version_string() const { return xen_version_; }
    bool shadow_paging() const { return shadow_paging_; }
    format::XenVersionDesc xen_version() const;

    // Every domain ever created (destroyed ones included), by domid.
    std::vector<uint32_t> domids() const;
    // nullptr when the host never had this domid.
    const SimDomain* find(uint32_t domid) const;
    // The current state (re-read when state.json changed). Throws Error for
    // an unknown domid.
    std::shared_ptr<const DomainState> state(uint32_t domid) const;
    // The domain when it exists and is not destroyed; Error (ESRCH) otherwise.
    const SimDomain& live(uint32_t domid) const;
    DomainInfo info(const SimDomain& d, const DomainState& s) const;

    void crash(uint32_t domid);
    void shutdown(uint32_t domid, ShutdownReason reason);
    void destroy(uint32_t domid);
    void pause(uint32_t domid);
    void unpause(uint32_t domid);
    // The guest gives pfns [pfn, pfn+count) back: ~0 in its p2m pages, mfns no longer its own.
    void balloon(uint32_t domid, uint64_t pfn, uint64_t count);
    // The guest takes ballooned pfns [pfn, pfn+count) back: a PV guest's p2m
    // entries name their frames again (each pfn its extent's mfn), an
    // HVM/PVH gfn is populated again. Both, like balloon(), are what the
    // guest and Xen do with log-dirty on (xen-dump-sim(1) "Ballooning"): a
    // PV guest's p2m pages it rewrites are marked dirty, and its
    // p2m_generation bumped where it publishes one (the linear p2m list);
    // an HVM/PVH gfn populated is marked dirty, one unpopulated clean (as
    // Xen's p2m code does).
    void unballoon(uint32_t domid, uint64_t pfn, uint64_t count);
    // shared_info.arch.p2m_generation as the guest keeps it now.
    uint64_t p2m_generation(const SimDomain& d, const DomainState& s) const;

    // Log-dirty mode (simulated-host.md "Log-dirty and the writer"), as
    // Hypervisor::enable_logdirty / read_dirty / disable_logdirty.
    void enable_logdirty(uint32_t domid);
    uint64_t read_dirty(uint32_t domid, DirtyRead how, std::span<uint64_t> bitmap, uint64_t pages);
    void disable_logdirty(uint32_t domid);
    // The guest's writer runs while `mapped` pages are mapped from it (when
    // it is running): its writes are made, and marked in the dirty bitmap
    // when log-dirty is on. The caller holds HostLock. Returns the state read.
    std::shared_ptr<const DomainState> run_writer(const SimDomain& d, uint64_t mapped);
    // The generation the writer last stamped into `pfn` (0: never written);
    // the caller holds HostLock.
    uint64_t written_generation(const SimDomain& d, uint64_t pfn);

    // `xen-dump-sim info --json` and `list --json`.
    nlohmann::json info_json(uint32_t domid) const;
    nlohmann::json list_json() const;

private:
    template <typename Change>
    void change_state(uint32_t domid, const char* event, Change change);
    void change_population(uint32_t domid, uint64_t pfn, uint64_t count, bool populate);

    struct CachedState {
        uint64_t ino = 0;
        int64_t mtime_ns = 0;
        int64_t size = -1;
        std::shared_ptr<const DomainState> state;
    };

    void load_domains() const;         // reads host.json (domains_mutex_ held)
    void reload_if_replaced() const;   // when host.json was replaced (domains_mutex_ held)

    HostPaths paths_;
    mutable std::mutex domains_mutex_;
    mutable std::string xen_version_;  // set by the constructor only
    mutable bool shadow_paging_ = false;
    struct LiveFiles {
        SharedWords dirty;   // a bit per pfn
        SharedWords writer;  // kWriterHeaderWords, then a generation per page
    };
    LiveFiles& live_files(const SimDomain& d);
    std::mutex live_mutex_;
    std::map<uint32_t, LiveFiles> live_;
    mutable bool loaded_ = false;
    mutable uint64_t host_json_ino_ = 0;
    mutable std::map<uint32_t, std::unique_ptr<SimDomain>> domains_;
    mutable std::mutex cache_mutex_;
    mutable std::map<uint32_t, CachedState> cache_;
};

}  // namespace xendump::sim
