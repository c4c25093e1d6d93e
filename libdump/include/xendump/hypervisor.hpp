// The hypervisor interface: everything the dumper and the service need from
// Xen, behind one abstract class with two backends, libxenctrl ("xen") and
// the simulated host ("sim:DIR"). It knows no files.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xendump/format.hpp"

namespace xendump {

// SHUTDOWN_* of xen/include/public/sched.h.
enum class ShutdownReason : unsigned {
    poweroff = 0, reboot = 1, suspend = 2, crash = 3, watchdog = 4, soft_reset = 5
};

// As xc_domain_getinfolist() gives it.
struct DomainInfo {
    uint32_t domid = 0;
    bool dying = false;
    bool shutdown = false;
    ShutdownReason shutdown_reason = ShutdownReason::poweroff;  // valid when shutdown
    bool paused = false;
    bool hvm = false;           // HVM or PVH (auto-translated)
    bool pvh = false;           // with hvm: a PVH guest (no emulated devices; Xen's arch_config emulation_flags)
    uint64_t tot_pages = 0;
    uint64_t max_pages = 0;
    uint64_t shr_pages = 0;     // its gfns backed by pages it shares (mem_sharing): not in tot_pages
    uint64_t shared_info_frame = 0;  // mfn (PV)
    uint32_t max_vcpu_id = 0;
    std::array<uint8_t, 16> handle{};  // uuid
    bool crashed() const { return shutdown && shutdown_reason == ShutdownReason::crash; }
    format::GuestType type() const {
        return !hvm ? format::GuestType::pv : pvh ? format::GuestType::pvh : format::GuestType::hvm;
    }
};

std::string uuid_to_string(const std::array<uint8_t, 16>& handle);

// A batch of foreign frames mapped read-only. Frames that failed have
// error(i) != 0 (an errno value) and page(i) must not be read.
class ForeignMapping {
public:
    virtual ~ForeignMapping() = default;
    virtual size_t count() const = 0;
    virtual const std::byte* page(size_t i) const = 0;
    virtual int error(size_t i) const = 0;
};

// Fires when some domain changed state (shut down, crashed, died); the caller
// rescans list_domains(). Real host: xenstore's @releaseDomain watch.
class DomainWatch {
public:
    virtual ~DomainWatch() = default;
    virtual int fd() const = 0;  // pollable for POLLIN
    // Consumes pending events; returns true when at least one was pending.
    virtual bool consume() = 0;
};

// How read_dirty() reads the log-dirty bitmap (XEN_DOMCTL_SHADOW_OP_CLEAN /
// _PEEK of xen/include/public/domctl.h).
enum class DirtyRead {
    clean,  // return the bits and clear them (XEN_DOMCTL_SHADOW_OP_CLEAN)
    peek,   // return the bits, leave them set (XEN_DOMCTL_SHADOW_OP_PEEK)
    // The last CLEAN of a pre-copy, with the domain paused
    // (XEN_DOMCTL_SHADOW_LOGDIRTY_FINAL: Xen also marks dirty the frames an
    // HVM guest's emulation still holds mapped for writing).
    final_clean,
};

// What the hypervisor holds at one gfn of an HVM/PVH guest
// (Hypervisor::gfn_types), as Xen's page types say it
// (XEN_DOMCTL_PFINFO_* of xen/include/public/domctl.h).
enum class GfnType : uint8_t {
    absent,   // XTAB (never populated, ballooned out, paged out, device
              // memory, or one of Xen's own pages the guest placed there:
              // shared_info, grant frames, which map all the same) or XALLOC
    present,  // populated guest memory (any other type): map_foreign maps it
    broken,   // BROKEN: memory with an uncorrected machine-check error,
              // which must not be read
};

// The gfns Xen answers for in one XEN_DOMCTL_getpageframeinfo3 (it refuses
// more with E2BIG; its own save code, xg_sr_save.c, asks as many at a time).
inline constexpr size_t kGfnTypesPerCall = 1024;

class Hypervisor {
public:
    virtual ~Hypervisor() = default;

    virtual std::string describe() const = 0;  // "xen" or "sim:/path"
    virtual std::vector<DomainInfo> list_domains() = 0;
    virtual std::optional<DomainInfo> domain_info(uint32_t domid) = 0;
    // Name from xenstore (/local/domain/ID/name); empty when there is none.
    virtual std::string domain_name(uint32_t domid) = 0;
    virtual std::optional<uint32_t> find_domain_by_name(std::string_view name);
    virtual unsigned guest_width(uint32_t domid) = 0;      // xc_domain_get_guest_width: 4 or 8
    virtual uint64_t maximum_gpfn(uint32_t domid) = 0;     // XENMEM_maximum_gpfn
    // xc_vcpu_getcontext: the native context (5168 or 2800 bytes), or nullopt
    // when the vcpu is offline / does not exist.
    virtual std::optional<std::vector<std::byte>> vcpu_context(uint32_t domid, uint32_t vcpu) = 0;
    // Maps frames (mfns for PV, gfns for HVM/PVH) read-only, one error per frame.
    virtual std::unique_ptr<ForeignMapping> map_foreign(uint32_t domid,
                                                        std::span<const uint64_t> frames) = 0;
    virtual void pause(uint32_t domid) = 0;
    virtual void unpause(uint32_t domid) = 0;
    virtual void destroy(uint32_t domid) = 0;
    virtual format::XenVersionDesc xen_version() = 0;
    virtual std::unique_ptr<DomainWatch> watch_domains() = 0;

    // Log-dirty mode (xc_shadow_control / xc_logdirty_control; Xen's own
    // pre-copy in tools/libs/guest/xg_sr_save.c): while it is on, every page
    // the guest writes sets its pfn's bit in a bitmap the hypervisor keeps.
    // enable_logdirty() turns it on or throws Error with the reason and an
    // errno: EOPNOTSUPP (a PV guest on a hypervisor built without shadow
    // paging: Debian 12's Xen 4.17), EBUSY (already on: a migration or a
    // checkpoint owns it, and it must be neither taken nor turned off),
    // EINVAL (passed-through PCI devices, or a dying domain). The defaults
    // here refuse with EOPNOTSUPP: a backend that cannot track dirty pages.
    virtual void enable_logdirty(uint32_t domid);
    // The bits of pfns [0, pages) into `bitmap` (bit p % 64 of word p / 64;
    // at least (pages + 63) / 64 words); returns how many are set.
    virtual uint64_t read_dirty(uint32_t domid, DirtyRead how, std::span<uint64_t> bitmap, uint64_t pages);
    // XEN_DOMCTL_SHADOW_OP_OFF: log-dirty off, the bitmap dropped.
    virtual void disable_logdirty(uint32_t domid);

    // What each of `gfns` of an HVM/PVH guest holds, one GfnType per gfn in
    // their order, without mapping any (any number of gfns: a backend asks
    // kGfnTypesPerCall at a time). Xen: xc_get_pfn_type_batch
    // (XEN_DOMCTL_getpageframeinfo3), as its save code learns which pages to
    // send. Throws Error with an errno when the hypervisor refuses (EPERM
    // under an XSM policy that forbids it, for one); the default here
    // refuses with EOPNOTSUPP: a backend that cannot tell. p2m discovery
    // then probes the gfns by mapping them (and says so in a warning).
    virtual std::vector<GfnType> gfn_types(uint32_t domid, std::span<const uint64_t> gfns);
};

// "xen" (default) or "sim:DIR". An empty `host` means $XEN_DUMP_HOST, else "xen".
// Throws Error with one clear line when the host cannot be opened (for "xen":
// no hypervisor on this machine, or built without libxen).
std::unique_ptr<Hypervisor> open_hypervisor(std::string_view host = {});

// Pauses a domain for the lifetime of the object; unpauses on every exit path.
// Xen's toolstack pauses nest (XEN_DOMCTL_pausedomain counts them in the
// domain's controller_pause_count, at most 255; the domain runs again only
// when every pause was undone): the object always takes a pause of its own,
// even when the domain is already paused by the operator or by another dump,
// and gives back exactly that one. A domain paused by someone else therefore
// stays paused afterwards, and another holder's unpause cannot make the
// domain run under this one.
class PausedDomain {
public:
    // Error when the domain does not exist or Xen refuses another pause.
    PausedDomain(Hypervisor& hv, uint32_t domid);
    ~PausedDomain();
    PausedDomain(const PausedDomain&) = delete;
    PausedDomain& operator=(const PausedDomain&) = delete;
    // True until release(): this object holds one pause of the domain.
    bool paused_by_us() const noexcept { return ours_; }
    // Whether the domain was already paused (by someone else) when this object paused it.
    bool was_paused_before() const noexcept { return paused_before_; }
    void release();  // unpause now (once)
    // Gives the pause up without undoing it: the domain stays paused after
    // this object (xen-dumpd --leave-paused); the operator unpauses it.
    void leave_paused() noexcept { ours_ = false; }

private:
    Hypervisor& hv_;
    uint32_t domid_;
    bool ours_ = false;
    bool paused_before_ = false;
};

// Log-dirty mode on for the lifetime of the object, off on every exit path
// (an error, a cancel, the unwinding of a signal's Error): the dumper turns
// off only what it turned on. Error from the constructor when the hypervisor
// refuses (Hypervisor::enable_logdirty's reasons).
class LogDirtyGuard {
public:
    LogDirtyGuard(Hypervisor& hv, uint32_t domid);
    ~LogDirtyGuard();
    LogDirtyGuard(const LogDirtyGuard&) = delete;
    LogDirtyGuard& operator=(const LogDirtyGuard&) = delete;
    bool on() const noexcept { return on_; }
    void release();  // off now (once)

private:
    Hypervisor& hv_;
    uint32_t domid_;
    bool on_ = false;
};

}  // namespace xendump
