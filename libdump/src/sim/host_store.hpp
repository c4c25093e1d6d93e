// The files of a simulated host in DIR, shared by every process that opens
// it (xen-dump-sim, the dumper, the service):
//
//   DIR/host.json                   format tag, xen_version, domids
//   DIR/lock                        flock()ed exclusively around every change
//   DIR/events                      one line appended per shutdown/crash/destroy;
//                                   watchers inotify it (xenstore @releaseDomain)
//   DIR/domains/ID/domain.json      normalized spec + what was derived (immutable)
//   DIR/domains/ID/state.json       pause count, shutdown, destroyed, ballooned
//                                   pfns; replaced atomically (rename)
//   DIR/domains/ID/overlay.pages    the pages holding p2m structures, in the
//                                   order of domain.json "p2m_pfns"
//   DIR/domains/ID/p2m_pages.bin    u64 per p2m page: the pfn that holds it
//   DIR/domains/ID/shared_info.page the shared_info frame (not guest memory)
//   DIR/domains/ID/dirty.bitmap     log-dirty bitmap, a bit per pfn (made when
//                                   log-dirty is first turned on)
//   DIR/domains/ID/writer.state     the guest writer's clock and the generation
//                                   of each page it writes (sim_writer.hpp)
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim/host_spec.hpp"
#include "xendump/fd.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump::sim {

inline constexpr const char* kHostFormat = "xen-dump-sim host 1";

struct HostPaths {
    std::filesystem::path dir;
    std::filesystem::path host_json() const { return dir / "host.json"; }
    std::filesystem::path lock() const { return dir / "lock"; }
    std::filesystem::path events() const { return dir / "events"; }
    std::filesystem::path domain_dir(uint32_t domid) const { return dir / "domains" / std::to_string(domid); }
    std::filesystem::path domain_json(uint32_t domid) const { return domain_dir(domid) / "domain.json"; }
    std::filesystem::path state_json(uint32_t domid) const { return domain_dir(domid) / "state.json"; }
    std::filesystem::path overlay(uint32_t domid) const { return domain_dir(domid) / "overlay.pages"; }
    std::filesystem::path p2m_pages(uint32_t domid) const { return domain_dir(domid) / "p2m_pages.bin"; }
    std::filesystem::path shared_info(uint32_t domid) const { return domain_dir(domid) / "shared_info.page"; }
    std::filesystem::path dirty_bitmap(uint32_t domid) const { return domain_dir(domid) / "dirty.bitmap"; }
    std::filesystem::path writer_state(uint32_t domid) const { return domain_dir(domid) / "writer.state"; }
};

// What changes while the host runs.
struct DomainState {
    unsigned pause_count = 0;  // xl pause nests (Xen's controller_pause_count)
    bool shutdown = false;
    ShutdownReason shutdown_reason = ShutdownReason::poweroff;
    bool destroyed = false;
    bool logdirty = false;  // log-dirty mode on (someone holds it)
    std::vector<PfnRange> ballooned;  // sorted, disjoint, merged
    // PV: the changes the guest made to its p2m since it was created (a
    // balloon in or out each); a guest with the linear p2m list publishes
    // p2m_generation = the created value + 2 per change (it bumps it before
    // and after each, as Linux does).
    uint64_t p2m_changes = 0;

    bool is_ballooned(uint64_t pfn) const;
    uint64_t ballooned_pages() const;
    void add_ballooned(uint64_t pfn, uint64_t count);
    void remove_ballooned(uint64_t pfn, uint64_t count);  // each pfn ballooned
    std::string name() const;  // running / paused / crashed / shutdown / destroyed
};

DomainState initial_state(const DomainSpec& d);
DomainState read_state(const std::filesystem::path& path);
// Writes a new file and renames it over `path`: readers see old or new, whole.
void write_state(const std::filesystem::path& path, const DomainState& state);

// flock(LOCK_EX) on DIR/lock for the lifetime of the object.
class HostLock {
public:
    explicit HostLock(const HostPaths& paths);

private:
    UniqueFd fd_;
};

// Appends one line to DIR/events (wakes every watcher).
void append_event(const HostPaths& paths, const std::string& line);

void write_file(const std::filesystem::path& path, const void* data, size_t size);
// Writes `text` to a new file and renames it over `path`: readers see the
// old file or the new one, whole. Error "cannot replace `what`" naming `path`.
void replace_file(const std::filesystem::path& path, const std::string& text, const std::string& what);
// Writes all of data at fd's position; errors name `path`.
void write_fully(int fd, const void* data, size_t size, const std::filesystem::path& path);

}  // namespace xendump::sim
