// "Dump a domain": the one code path shared by the one-shot `xen-dumpd
// --domain` and the service. Discovers the guest's pages through the
// hypervisor interface, pauses it (RAII), and writes a v1 file.
//
// Memory (issue 19): the p2m is walked a window at a time (at most 256Ki
// entries, 4 MiB) and the present pages are kept as extents, 32 bytes per
// stretch of pages whose pfns and frames both rise by one (an HVM/PVH guest:
// per run of present gfns; a PV guest's frames come in long stretches);
// duplicate frames are found from the stretches (FrameDuplicates: about 100
// bytes per stretch while they are sorted). With the writer's own bound
// (xendump/writer.hpp), a v1 dump of a usual guest of any size stays under
// 128 MiB of RSS; what grows is per extent and per run, not per page.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "xendump/format.hpp"
#include "xendump/hypervisor.hpp"
#include "xendump/kdump.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/writer.hpp"

namespace xendump {

struct DumpOptions {
    bool live = false;  // do not pause; record PAUSED=0
    format::Reason reason = format::Reason::request;
    // A compact file (makedumpfile's compressed kdump format) instead of v1:
    // files only (dump_domain_to_fd refuses it), pages compressed with
    // `compression` on write.threads threads.
    bool kdump = false;
    Compression compression = Compression::zstd;
    // With kdump: keep only the pages makedumpfile -d keeps at this level
    // (0-31, xendump/kernel/dump_level.hpp), classified from the paused
    // guest's struct pages through the VMCOREINFO found in its memory (one
    // extra read of the guest's pages before the pass, while it is paused).
    // A guest without one gets level 1 at most: write.on_warning says so, and
    // DumpResult::dump_level is the level applied. Error with v1 (a v1 file's
    // missing pfns mean "absent", not "left out").
    unsigned dump_level = 0;
    // Digests, threads, the guest kernel (on by default for dumps), progress,
    // warnings, cancel: handed to the writer as they are.
    WriteOptions write = [] {
        WriteOptions w;
        w.guest_kernel = true;
        return w;
    }();
};

struct DumpResult {
    std::filesystem::path path;  // empty for fd output
    uint32_t domid = 0;
    std::string name;
    std::string uuid;
    format::GuestType type = format::GuestType::pv;
    uint64_t nr_pages = 0;
    uint64_t nr_runs = 0;
    uint64_t file_size = 0;
    std::vector<uint64_t> unreadable_pfns;
    std::vector<std::string> warnings;
    bool kernel_segment = false;  // the guest kernel's image PT_LOAD (p_vaddr) was added
    unsigned dump_level = 0;      // the level applied (DumpOptions::dump_level, less what the guest lacks)
};

// Resolves "7" or "web01" to a domid. Throws Error when there is no such domain.
uint32_t resolve_domain(Hypervisor& hv, const std::string& id_or_name);

// The default file name: NAME-DOMID-YYYYMMDDTHHMMSSZ.core (UTC).
std::string default_dump_name(const std::string& name, uint32_t domid,
                              std::chrono::system_clock::time_point when);

// Writes the dump of `domid` atomically to `path` (Error if it exists).
DumpResult dump_domain_to_file(Hypervisor& hv, uint32_t domid, const std::filesystem::path& path,
                               const DumpOptions& options = {});
// What each dump level would keep of `domid` (makedumpfile --mem-usage),
// without writing anything: the guest is paused for the classification as
// for a dump (unless options.live) and runs again afterwards. Reads every
// page to find the VMCOREINFO and the zero pages, and the struct pages once
// per level. options.write's cancel and on_warning are used, and
// options.dump_level's row is given too (kernel::estimate_dump_levels'
// `also`); Error as for a dump.
kernel::DumpLevelEstimate estimate_domain_levels(Hypervisor& hv, uint32_t domid, const DumpOptions& options = {});

// Streams the dump to `fd` (a pipe or a file), no seeks unless `seekable`.
DumpResult dump_domain_to_fd(Hypervisor& hv, uint32_t domid, int fd, bool seekable,
                             const DumpOptions& options = {});

}  // namespace xendump
