// Dump a domain (issue 3): discover the guest's present pages, read its vcpu
// contexts, pause it for the duration (unless live), write a v1 file.
#include "xendump/dumper.hpp"

#include <ctime>
#include <cstring>

#include <algorithm>
#include <memory>
#include <utility>

#include "dump/hypervisor_page_source.hpp"
#include "dump/live_image.hpp"
#include "dump/precopy.hpp"
#include "io/object_output.hpp"
#include "hv/forwarding_hypervisor.hpp"
#include "kdump/write_kdump.hpp"
#include "p2m/p2m.hpp"
#include "store/multipart_output.hpp"
#include "writer/write_v1.hpp"
#include "p2m/p2m_windows.hpp"
#include "p2m/page_extents.hpp"
#include "pipeline/kernel_observer.hpp"
#include "util/runs.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/error.hpp"
#include "xendump/kernel/prstatus.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/text.hpp"
#include "xendump_config.h"

namespace xendump {

namespace {

using format::GuestType;

// Pages per mapping call: large enough that the per-call cost of foreign
// mapping (an mmap + hypercall on a real host) is amortised; small enough
// that one batch stays well inside the dumper's memory bound.
constexpr size_t kMapBatchPages = 1024;

std::string object_of(uint32_t domid) { return "domain " + std::to_string(domid); }

// `t` in UTC, formatted with strftime's `format` (TIME= and file names).
std::string utc_time(std::chrono::system_clock::time_point t, const char* format) {
    std::time_t tt = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, format, &tm);
    return buf;
}

GuestType guest_type_of(const DomainInfo& info) {
    if (!info.hvm) return GuestType::pv;
    return info.pvh ? GuestType::pvh : GuestType::hvm;
}

// Everything read from the hypervisor before the pages: the spec and the
// page source. Built while the domain is already paused.
struct Prepared {
    DumpSpec spec;
    std::unique_ptr<dump::HypervisorPageSource> source;
    std::vector<std::string> warnings;
    DomainInfo info;
    std::string name;
    dump::DiscoveredLayout layout;  // a pre-copy's: what tells later whether the layout changed
};

Prepared prepare(Hypervisor& hv, uint32_t domid, const DumpOptions& opt, bool paused) {
    Prepared p;
    auto info = hv.domain_info(domid);
    if (!info) throw Error("no such domain", object_of(domid));
    if (info->dying) throw Error("the domain is dying; its memory can no longer be read", object_of(domid));
    p.info = *info;
    p.name = hv.domain_name(domid);

    DumpSpec& spec = p.spec;
    spec.type = guest_type_of(*info);
    spec.guest_width = spec.type == GuestType::pv ? hv.guest_width(domid) : 8;
    if (spec.guest_width != 4 && spec.guest_width != 8)
        throw Error("unsupported guest width " + std::to_string(spec.guest_width), object_of(domid));
    spec.xen_version = hv.xen_version();

    // vcpu contexts: every vcpu whose context can be read, as xg_core does;
    // the slot order is the order of VCPUS=.
    std::string vcpu_ids;
    for (uint32_t v = 0; v <= info->max_vcpu_id; ++v) {
        auto ctx = hv.vcpu_context(domid, v);
        if (!ctx) continue;
        spec.vcpus.push_back(VcpuContext{v, std::move(*ctx)});
    }
    if (spec.vcpus.empty()) throw Error("no vcpu context could be read", object_of(domid));

    // Each page is mapped once, by the page source (see P2mOptions). The p2m
    // is walked a window at a time and kept as extents (issue 19: memory by
    // stretches of pages, not by pages); duplicate frames are found from the
    // stretches and dropped as discover_p2m() drops them.
    // Progress from the first pfn (WriteProgress::finding_pages): a large
    // guest's discovery takes a while before the pass has anything to say.
    P2mWindows windows(hv, *info, P2mOptions{.verify_frames = false});
    FrameDuplicates duplicates;
    PageExtents present;
    std::vector<PageEntry> window;
    for (bool more = true; more;) {
        if (opt.write.on_progress) {
            WriteProgress progress;
            progress.finding_pages = true;
            progress.pages_done = windows.examined();
            progress.pages_total = windows.header().p2m_size;
            opt.write.on_progress(progress);
        }
        if ((more = windows.next(window))) {
            duplicates.add(window);
            present.append(window);
        }
    }
    duplicates.finish();
    for (auto& w : windows.warnings(&duplicates)) p.warnings.push_back(std::move(w));
    std::vector<PageExtents::PfnRange> dropped;
    for (const auto& r : duplicates.dropped()) dropped.push_back({r.first, r.end});
    if (!dropped.empty()) present = present.without(dropped);
    P2mMap discovered = windows.header();
    if (opt.precopy.on) {
        p.layout.tot_pages = info->tot_pages;
        if (spec.type == GuestType::pv) {
            PvP2mShape& shape = p.layout.pv.emplace();
            shape.kind = discovered.kind;
            shape.width = discovered.guest_width;
            shape.p2m_size = discovered.p2m_size;
            shape.leaf_frames.assign(windows.leaf_frames().begin(), windows.leaf_frames().end());
            p.layout.shared_info = discovered.shared_info;
        }
    }
    if (spec.type == GuestType::pv && discovered.shared_info.size() == format::kSharedInfoSize)
        spec.shared_info = std::move(discovered.shared_info);

    KeyValues& kv = spec.domain;
    kv.set(keys::kDomid, std::to_string(domid));
    kv.set(keys::kName, escape_text(p.name));  // any bytes, kept one line (xendump/text.hpp)
    kv.set(keys::kUuid, uuid_to_string(info->handle));
    kv.set(keys::kType, std::string(format::to_string(spec.type)));
    kv.set(keys::kGuestWidth, std::to_string(spec.guest_width));
    kv.set(keys::kMaxPfn, std::to_string(discovered.p2m_size));
    kv.set(keys::kP2m, std::string(format::to_string(discovered.kind)));
    kv.set(keys::kReason, std::string(format::to_string(opt.reason)));
    kv.set(keys::kPaused, paused ? "1" : "0");
    if (opt.live) kv.set(keys::kLive, "inconsistent");  // a pre-copy's LIVE= comes with its final round
    kv.set(keys::kTime, utc_time(std::chrono::system_clock::now(), "%Y-%m-%dT%H:%M:%SZ"));
    kv.set(keys::kWriter, std::string("xen-dumpd ") + XENDUMP_VERSION);

    // A guest running while its pages are read without pre-copy: each page
    // is copied once, so its digest is that of the bytes the file holds.
    p.source = std::make_unique<dump::HypervisorPageSource>(hv, domid, std::move(present), kMapBatchPages,
                                                            /*pages_change=*/opt.live);
    return p;
}

// The hypervisor as the dump's reading stages see it: every call that reads
// the guest (the p2m walk, the vcpu contexts, the page pass, the guest-kernel
// scans' re-reads) first checks the cancel flag, so a cancel (SIGTERM,
// xen-dumpctl cancel, service stop) takes effect between two mapping calls
// at any stage, and the dump unwinds through its PausedDomain. Pausing and
// unpausing go to the real hypervisor, never through this check.
class CancellableHypervisor final : public ForwardingHypervisor {
public:
    CancellableHypervisor(Hypervisor& hv, const std::atomic<bool>* cancel, uint32_t domid)
        : ForwardingHypervisor(hv), cancel_(cancel), domid_(domid) {}

    std::optional<std::vector<std::byte>> vcpu_context(uint32_t domid, uint32_t vcpu) override {
        check();
        return ForwardingHypervisor::vcpu_context(domid, vcpu);
    }
    std::unique_ptr<ForeignMapping> map_foreign(uint32_t domid, std::span<const uint64_t> frames) override {
        check();
        return ForwardingHypervisor::map_foreign(domid, frames);
    }
    uint64_t read_dirty(uint32_t domid, DirtyRead how, std::span<uint64_t> bitmap, uint64_t pages) override {
        check();
        return ForwardingHypervisor::read_dirty(domid, how, bitmap, pages);
    }
    std::vector<GfnType> gfn_types(uint32_t domid, std::span<const uint64_t> gfns) override {
        check();
        return ForwardingHypervisor::gfn_types(domid, gfns);
    }

private:
    void check() const {
        if (cancel_ && cancel_->load()) throw Error("cancelled", object_of(domid_));
    }

    const std::atomic<bool>* cancel_;
    uint32_t domid_;
};

// A PV guest's machine frames back to pfns: the runs of entries whose
// frames rise by one with their pfns, sorted by frame (24 bytes a run, not a
// page: a guest's p2m is mostly such runs).
kernel::FrameToPfn frame_to_pfn(const PageSource& source) {
    struct FrameRun {
        uint64_t frame, pfn, count;
    };
    auto runs = std::make_shared<std::vector<FrameRun>>();
    for_each_entry_window(source, [&](uint64_t, std::span<const PageEntry> w) {
        for (const PageEntry& e : w) {
            if (!runs->empty()) {
                FrameRun& r = runs->back();
                if (e.gmfn == r.frame + r.count && e.pfn == r.pfn + r.count) {
                    ++r.count;
                    continue;
                }
            }
            runs->push_back({e.gmfn, e.pfn, 1});
        }
    });
    runs->shrink_to_fit();
    std::sort(runs->begin(), runs->end(), [](const FrameRun& a, const FrameRun& b) { return a.frame < b.frame; });
    return [runs](uint64_t frame) -> std::optional<uint64_t> {
        auto it = util::run_holding(*runs, frame, &FrameRun::frame, &FrameRun::count);
        if (it == runs->end()) return std::nullopt;
        return it->pfn + (frame - it->frame);
    };
}

// The dump-level classifier's view of the paused guest, as
// dump_level_input() gives it for a dump file: its pages through the page
// source, the VMCOREINFO found in them (x86_64 guests only), a PV guest's
// machine frames back to pfns, and each vcpu's stack pointer.
struct LiveLevelInput {
    std::optional<kernel::Vmcoreinfo> vmcoreinfo;
    kernel::DumpLevelInput input;
};

std::unique_ptr<LiveLevelInput> live_level_input(const Prepared& p, const DumpOptions& opt) {
    auto live = std::make_unique<LiveLevelInput>();
    PageSource& source = *p.source;
    kernel::DumpLevelInput& in = live->input;
    in.present = kernel::borrowed(source);
    in.reader = kernel::page_reader(source);
    in.cancel = opt.write.cancel;
    if (p.spec.guest_width == 8) {
        if (auto found = pipeline::find_vmcoreinfo(source)) live->vmcoreinfo = std::move(found->info);
        for (const auto& v : p.spec.vcpus)
            if (v.bytes.size() >= kernel::XenVcpuContextX86_64::kSize)
                in.stack_pointers.push_back(kernel::XenVcpuContextX86_64::decode(v.bytes).rsp);
    }
    in.vmcoreinfo = live->vmcoreinfo ? &*live->vmcoreinfo : nullptr;
    if (p.spec.type == GuestType::pv) in.frame_to_pfn = frame_to_pfn(source);
    return live;
}

// DumpOptions::inspect_guest, while the guest is still paused: its pages
// through the page source, as the dump holds them; VMCOREINFO found again
// (find_vmcoreinfo stops at the first witnessed text: a few MiB of pages).
void inspect_paused_guest(Prepared& p, const DumpOptions& opt) {
    GuestView guest;
    guest.type = p.spec.type;
    guest.guest_width = p.spec.guest_width;
    guest.vcpus = p.spec.vcpus;
    guest.pages = kernel::page_reader(*p.source);
    if (p.spec.type == GuestType::pv) guest.frame_to_pfn = frame_to_pfn(*p.source);
    std::optional<kernel::Vmcoreinfo> info;
    if (p.spec.guest_width == 8)
        if (auto found = pipeline::find_vmcoreinfo(*p.source)) info = std::move(found->info);
    opt.inspect_guest(guest, info ? &*info : nullptr);
}

// The pages DumpOptions::dump_level keeps of the paused guest; what the
// guest cannot support goes to on_warning.
kernel::PageSelection select_live_pages(const Prepared& p, const DumpOptions& opt, std::vector<std::string>& warnings) {
    const auto live = live_level_input(p, opt);
    kernel::PageSelection sel = kernel::select_pages(live->input, opt.dump_level);
    dump::level_warnings(sel, opt.dump_level, opt.write, warnings);
    return sel;
}

// The dumper's pause, cancellable view of the hypervisor and discovery, for
// a dump and for an estimate alike.
class PreparedDomain {
public:
    // `restarts`: the pre-copies started over before this one (their
    // guest's layout changed).
    PreparedDomain(Hypervisor& real_hv, uint32_t domid, const DumpOptions& opt, unsigned restarts = 0)
        : hv_(real_hv, opt.write.cancel, domid) {
        // A consistent live dump turns log-dirty on before it reads anything
        // (a refusal comes before any work), and pauses only at the end.
        if (opt.precopy.on) precopy_.emplace(hv_, real_hv, domid, opt.precopy);
        // PAUSED= records what this dump did: 1 when it held a pause of its own
        // from before the first read to after the last one. A pause taken by
        // someone else (the operator, another dump) proves nothing about the
        // whole dump, since its holder may unpause at any time; pauses nest, so
        // this dump pauses such a domain once more all the same.
        else if (!opt.live) pause_.emplace(real_hv, domid);
        p_ = prepare(hv_, domid, opt, pause_.has_value());
        if (precopy_) {
            if (p_.layout.pv) p_.layout.frame_to_pfn = frame_to_pfn(*p_.source);
            precopy_->discovered(std::move(p_.layout), restarts);
        }
        for (const auto& w : p_.warnings)
            if (opt.write.on_warning) opt.write.on_warning(w);
    }
    Prepared& get() { return p_; }
    dump::Precopy* precopy() { return precopy_ ? &*precopy_ : nullptr; }

private:
    std::optional<PausedDomain> pause_;  // first: released last
    CancellableHypervisor hv_;
    std::optional<dump::Precopy> precopy_;  // log-dirty off when it goes
    Prepared p_;
};

using dump::write_compact;

// A consistent live dump to `target`: its pre-copy's rounds (Precopy::run)
// after the v1 writer's pass, into the file itself when it is a plaintext v1
// file, else into an image made into `target` after the unpause
// (dump/live_image.hpp). `selection`: what the dump level kept, decided on
// the image. DumpOptions::inspect_guest sees the file's guest.
WriteResult write_live(Hypervisor& hv, uint32_t domid, const dump::LiveTarget& target, const DumpSpec& spec,
                       PageSource& src, const DumpOptions& options, dump::Precopy& precopy,
                       std::optional<kernel::PageSelection>& selection) {
    const WriteOptions& wo = options.write;
    const bool pv = spec.type == GuestType::pv;
    const uint64_t shared_info_frame = pv ? hv.domain_info(domid).value_or(DomainInfo{}).shared_info_frame : 0;
    const writer::LiveRounds rounds = [&](writer::SlotRewriter& slots, std::span<const uint64_t> unreadable) {
        return precopy.run(slots, src, unreadable, spec.vcpus, pv, shared_info_frame, wo.on_warning, wo.on_progress);
    };
    precopy.pass_begins();
    if (dump::needs_image(target, options)) return dump::write_through_image(target, spec, src, options, rounds, selection);
    WriteResult r = writer::write_dump_file_live(*target.to.path, spec, src, wo, rounds);
    if (options.inspect_guest) dump::inspect_dump(DumpReader::open(*target.to.path), options);
    return r;
}

// One attempt of run_dump: discovery, the pass, and a pre-copy's rounds.
template <typename Write>
DumpResult dump_once(Hypervisor& real_hv, uint32_t domid, const DumpOptions& opt, Write& write, unsigned restarts) {
    const WriteOptions& wo = opt.write;
    PreparedDomain prepared(real_hv, domid, opt, restarts);
    Prepared& p = prepared.get();
    dump::Precopy* precopy = prepared.precopy();
    // A pre-copy's level is decided on its image, the paused instant's guest.
    std::optional<kernel::PageSelection> selection;
    if (opt.dump_level != 0 && !precopy) selection = select_live_pages(p, opt, p.warnings);

    // Guest kernel (issue 9, WriteOptions::guest_kernel): NT_PRSTATUS up
    // front, VMCOREINFO and the KERNEL=/KERNELOFFSET= keys of NT_XEN_DOMAIN
    // found by the pipeline's kernel observer during the single pass
    // (xen-dump-core(5) "NT_XEN_DOMAIN keys" lets writers add keys; "Notes"
    // has readers skip the padding note a pipe keeps in their place).
    WriteResult wr = write(p.spec, *p.source, wo, selection, precopy);
    for (auto& w : wr.warnings) p.warnings.push_back(std::move(w));
    if (opt.inspect_guest && !precopy) inspect_paused_guest(p, opt);  // a pre-copy's: from its file (write_live)

    DumpResult r;
    r.domid = domid;
    r.name = p.name;
    r.uuid = uuid_to_string(p.info.handle);
    r.type = p.spec.type;
    r.nr_pages = wr.nr_pages;
    r.nr_runs = wr.nr_runs;
    r.file_size = wr.file_size;
    r.kernel_segment = wr.kernel_segment;
    r.dump_level = selection ? selection->level : 0;
    if (precopy) r.live = precopy->stats();
    r.unreadable_pfns = std::move(wr.unreadable_pfns);
    r.warnings = std::move(p.warnings);
    if (!r.unreadable_pfns.empty()) {
        std::string w = std::to_string(r.unreadable_pfns.size()) +
                        " page(s) could not be read and were stored as zeros (listed in NT_XEN_UNREADABLE)";
        if (wo.on_warning) wo.on_warning(w);
        r.warnings.push_back(std::move(w));
    }
    return r;
}

template <typename Write>
DumpResult run_dump(Hypervisor& real_hv, uint32_t domid, const DumpOptions& opt, Write&& write) {
    const WriteOptions& wo = opt.write;
    if (opt.dump_level > kernel::kMaxDumpLevel)
        throw Error("dump level " + std::to_string(opt.dump_level) + " is not 0 to 31", object_of(domid));
    if (opt.dump_level != 0 && !opt.kdump)
        throw Error("a dump level needs the compact (kdump) format: a v1 file's missing pages mean absent, "
                    "not left out", object_of(domid));
    if (opt.flattened && !opt.kdump)
        throw Error("the flattened format carries a compact (kdump) file: a v1 file is streamed as it is",
                    object_of(domid));
    if (opt.precopy.on && opt.live)
        throw Error("a live dump is either consistent (pre-copy) or inconsistent, not both", object_of(domid));
    // A pre-copy whose guest's layout changed (dump::LayoutChanged) starts
    // over: the unfinished file is gone, log-dirty off, the guest running.
    std::vector<std::string> restart_warnings;
    for (unsigned restarts = 0;; ++restarts) {
        try {
            DumpResult r = dump_once(real_hv, domid, opt, write, restarts);
            r.warnings.insert(r.warnings.begin(), restart_warnings.begin(), restart_warnings.end());
            return r;
        } catch (const dump::LayoutChanged& c) {
            if (restarts == dump::kMaxLayoutRestarts)
                throw Error("the guest's memory layout kept changing (ballooning) during the pre-copy: " +
                                std::to_string(restarts) + " restarts, the last because " + c.why +
                                "; dump it paused or with --live=inconsistent",
                            object_of(domid));
            std::string w = "the guest's memory layout changed during the pre-copy (" + c.why +
                            "): starting over with a fresh discovery (restart " + std::to_string(restarts + 1) +
                            " of at most " + std::to_string(dump::kMaxLayoutRestarts) + ")";
            if (wo.on_warning) wo.on_warning(w);
            restart_warnings.push_back(std::move(w));
        }
    }
}

}  // namespace

uint32_t resolve_domain(Hypervisor& hv, const std::string& id_or_name) {
    if (!id_or_name.empty() && id_or_name.find_first_not_of("0123456789") == std::string::npos) {
        unsigned long v = 0;
        try {
            v = std::stoul(id_or_name);
        } catch (const std::exception&) {
            throw Error("domain id out of range: " + id_or_name);
        }
        if (v > 0x7FF0) throw Error("domain id out of range: " + id_or_name);
        auto domid = static_cast<uint32_t>(v);
        if (!hv.domain_info(domid)) throw Error("no such domain", object_of(domid));
        return domid;
    }
    if (auto d = hv.find_domain_by_name(id_or_name)) return *d;
    throw Error("no domain named '" + id_or_name + "'");
}

std::string default_dump_name(const std::string& name, uint32_t domid,
                              std::chrono::system_clock::time_point when) {
    const std::string stamp = utc_time(when, "%Y%m%dT%H%M%SZ");
    std::string safe;
    for (char c : name.empty() ? std::string("domain") : name)
        safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
    return safe + "-" + std::to_string(domid) + "-" + stamp + ".core";
}

DumpResult dump_domain_to_file(Hypervisor& hv, uint32_t domid, const std::filesystem::path& path,
                               const DumpOptions& options) {
    DumpResult r = run_dump(hv, domid, options,
                            [&](const DumpSpec& spec, PageSource& src, const WriteOptions& wo,
                                std::optional<kernel::PageSelection>& selection, dump::Precopy* precopy) {
        if (precopy) return write_live(hv, domid, dump::LiveTarget{path, true}, spec, src, options, *precopy, selection);
        if (options.kdump) return write_compact(path, spec, src, wo, selection ? &*selection : nullptr, options);
        return write_dump_file(path, spec, src, wo);
    });
    r.path = path;
    return r;
}

DumpResult dump_domain_to_object(Hypervisor& hv, uint32_t domid, s3::Client& client, const s3::Url& url,
                                 const DumpOptions& options, const s3::UploadOptions& upload) {
    if (options.flattened)
        throw Error("an object holds the compact file itself, not its flattened stream (no -F)", url.str());
    if (!options.write.recipients.empty())
        throw Error(io::kEncryptedNotStreamed, url.str());
    try {
        // Before the pause: a store that refuses the upload costs the guest nothing.
        store::MultipartOutput out(client, url, upload);
        DumpResult r = run_dump(hv, domid, options,
                                [&](const DumpSpec& spec, PageSource& src, const WriteOptions& wo,
                                    std::optional<kernel::PageSelection>& selection, dump::Precopy* precopy) {
                                    const auto to = kdump::Destination::object_output(out, url.str());
                                    if (precopy)
                                        return write_live(hv, domid, dump::LiveTarget{to, true}, spec, src, options,
                                                          *precopy, selection);
                                    if (options.kdump)
                                        return write_compact(to, spec, src, wo, selection ? &*selection : nullptr,
                                                             options);
                                    return writer::write_v1(-1, true, url.str(), spec, src, wo, {}, nullptr, nullptr,
                                                            &out);
                                });
        r.path = url.str();
        return r;
    } catch (const Error& e) {
        throw e.with_object(url.str());
    }
}

DumpResult dump_domain_to_fd(Hypervisor& hv, uint32_t domid, int fd, bool seekable,
                             const DumpOptions& options) {
    return run_dump(hv, domid, options,
                    [&](const DumpSpec& spec, PageSource& src, const WriteOptions& wo,
                        std::optional<kernel::PageSelection>& selection, dump::Precopy* precopy) {
                        if (precopy)
                            return write_live(hv, domid, dump::LiveTarget{kdump::Destination::stream(fd), seekable},
                                              spec, src, options, *precopy, selection);
                        if (options.kdump)
                            return write_compact(kdump::Destination::stream(fd), spec, src, wo,
                                                 selection ? &*selection : nullptr, options);
                        return write_dump(fd, seekable, spec, src, wo);
                    });
}

kernel::DumpLevelEstimate estimate_domain_levels(Hypervisor& hv, uint32_t domid, const DumpOptions& options_in) {
    // An estimate writes no pages to keep consistent: a live one just does not pause.
    DumpOptions options = options_in;
    if (options.precopy.on) {
        options.precopy.on = false;
        options.live = true;
    }
    PreparedDomain prepared(hv, domid, options);
    const auto live = live_level_input(prepared.get(), options);
    return kernel::estimate_dump_levels(live->input, options.dump_level);
}

}  // namespace xendump
