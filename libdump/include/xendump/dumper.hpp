// "Dump a domain": the one code path shared by the one-shot `xen-dumpd
// --domain` and the service. Discovers the guest's pages through the
// hypervisor interface, pauses it (RAII), and writes a v1 file.
//
// Memory (issue 19): the p2m is walked a window at a time (at most 256Ki
// entries, 4 MiB) and the present pages are kept as extents, 32 bytes per
// stretch of pages whose pfns and frames both rise by one (an HVM/PVH guest:
// per run of present gfns; a PV guest's frames come in long stretches);
// duplicate frames are found from the stretches (FrameDuplicates: about 100
// bytes per stretch while they are sorted). A PV p2m is believed for no
// more entries than the domain can own frames (p2m/p2m.hpp), so a hostile
// one costs no more stretches than the guest has pages. With the writer's
// own bound (xendump/writer.hpp), a v1 dump of a usual guest of any size
// stays under 128 MiB of RSS; what grows is per extent and per run, not per
// page.
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

// What a consistent live dump did (DumpOptions::precopy).
struct LiveStats {
    bool precopy = false;
    uint64_t pause_usec = 0;      // the guest paused: from the pause to the unpause (or, left paused, to the end of the copy)
    unsigned rounds = 0;          // rounds of re-copying while the guest ran
    uint64_t pages_recopied = 0;  // pages copied again after the first pass, the pause's included
    uint64_t pages_in_pause = 0;  // of them, copied while the guest was paused
    bool left_paused = false;     // Precopy::leave_paused
    // Times the pre-copy started over because the guest's memory layout
    // changed (ballooning, its p2m, its highest gfn): at most 3.
    unsigned restarts = 0;
};

struct GuestView;  // xendump/dump_kernel_log.hpp
namespace kernel {
class Vmcoreinfo;  // xendump/kernel/vmcoreinfo.hpp
}

struct DumpOptions {
    // Do not pause and do not pre-copy: pages of different instants
    // (--live=inconsistent); records PAUSED=0 and LIVE=inconsistent.
    bool live = false;
    // A consistent dump of a running guest (issue 35, --live): log-dirty
    // pre-copy (dump/precopy.hpp), the guest paused only for the last
    // pages and its vcpu state. A plaintext v1 file takes the pages
    // rewritten in place; any other output (kdump, encrypted, a pipe, an
    // object) is made after the unpause from the v1 image written to a
    // temporary file (sealed when encrypted; dump/live_image.hpp), its dump
    // level decided on the image. Error with the reason
    // when the hypervisor refuses log-dirty (a PV guest without shadow
    // paging, log-dirty in use, passed-through devices, a dying domain).
    struct Precopy {
        bool on = false;
        std::chrono::microseconds max_pause{100000};  // pause once what is left copies in this
        unsigned max_rounds = 5;                      // rounds of re-copying at most (Xen's save: 5)
        bool leave_paused = false;                    // the guest stays paused after the final round
        // A directory where the dump records the log-dirty mode it turned
        // on while it is on, for release_stale_logdirty() after the dumper
        // is killed (xendump/logdirty_records.hpp); empty: no record.
        std::filesystem::path records{};
    };
    Precopy precopy;
    format::Reason reason = format::Reason::request;
    // A compact file (makedumpfile's compressed kdump format) instead of v1,
    // pages compressed with `compression` on write.threads threads: a file,
    // or through dump_domain_to_fd makedumpfile's flattened stream
    // (write_kdump_flattened, xendump/kdump.hpp).
    bool kdump = false;
    Compression compression = Compression::zstd;
    // With kdump, to a file: write it flattened too (KdumpOptions::flattened,
    // makedumpfile -F), a file for makedumpfile -R. Error without kdump.
    bool flattened = false;
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
    // Called once the pages are written and before the guest runs again
    // (within the dump's pause), with the guest as the dump holds it, read
    // from the hypervisor (GuestView), and its VMCOREINFO (found in its
    // pages, x86_64 guests; null: none): for what a caller reads of the guest
    // kernel and cannot read back from the file it wrote (xen-dumpd: the log
    // of an encrypted dump). Not called when the write fails; what it throws
    // fails the dump (the file is written by then). A consistent live dump
    // (precopy) runs its guest again before: it is called with the guest as
    // the file (or its image) holds it, the paused instant, before the
    // final form is written from the image.
    std::function<void(const GuestView& guest, const kernel::Vmcoreinfo* vmcoreinfo)> inspect_guest;
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
    std::optional<LiveStats> live;  // a consistent live dump's pre-copy
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

// Streams the dump into the object `url`: a v1 file (write_dump_object) or,
// with options.kdump, a compact file (the bytes write_kdump_file would
// write; its head, bitmaps and descriptors, 24 bytes a page kept, wait in a
// sealed temporary file until the pages are in). The upload is created
// before the guest is paused, so wrong credentials or a missing bucket fail
// first. Not flattened, not encrypted, not a consistent live dump: Error.
DumpResult dump_domain_to_object(Hypervisor& hv, uint32_t domid, s3::Client& client, const s3::Url& url,
                                 const DumpOptions& options = {}, const s3::UploadOptions& upload = {});

// Streams the dump to `fd` (a pipe or a file), no seeks unless `seekable`;
// a compact one (options.kdump) as makedumpfile's flattened stream, never
// seeking.
DumpResult dump_domain_to_fd(Hypervisor& hv, uint32_t domid, int fd, bool seekable,
                             const DumpOptions& options = {});

}  // namespace xendump
