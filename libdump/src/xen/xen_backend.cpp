// The real hypervisor backend: libxenctrl for domain control and vcpu state,
// libxenforeignmemory for mapping guest frames, libxenstore for names and the
// @releaseDomain watch. It can only be exercised on a Xen dom0; elsewhere
// open_xen_backend() throws one clear Error line.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "hv/backends.hpp"
#include "xen/xen_handles.hpp"
#include "xen/xen_version.hpp"
#include "xendump/error.hpp"

// libxenctrl exports xc_get_pfn_type_batch (symbol version VERS_4.17.0 in
// Debian's 4.17; libxenguest's save code calls it) but declares it only in
// its private tools/libs/ctrl/xc_private.h, not in xenctrl.h: declared here
// with the signature it is defined with. `arr` holds gfns on the way in and
// their XEN_DOMCTL_PFINFO_* types on the way out; at most 1024 (E2BIG);
// 0, or -1 with errno.
extern "C" int xc_get_pfn_type_batch(xc_interface* xch, uint32_t dom, unsigned int num, xen_pfn_t* arr);

namespace xendump {

namespace {

using xen::ForeignMemoryHandle;
using xen::MallocPtr;
using xen::QuietLogger;
using xen::XcHandle;
using xen::XenstoreHandle;

std::string domain_object(uint32_t domid) { return "domain " + std::to_string(domid); }

// How the kernel exposes the hypercall interface (libxencall opens the first,
// then falls back to the second).
constexpr const char* kPrivcmdPaths[] = {"/dev/xen/privcmd", "/proc/xen/privcmd"};

// The one line a user sees on a machine that is not a Xen dom0.
[[noreturn]] void throw_no_hypervisor(const std::string& detail) {
    throw Error("cannot open the Xen hypervisor interface (is this a Xen dom0? " + detail + ")", "xen");
}

void check_privcmd_present() {
    int first_errno = 0;
    for (const char* path : kPrivcmdPaths) {
        if (access(path, R_OK | W_OK) == 0) return;
        if (first_errno == 0) first_errno = errno;
    }
    throw_no_hypervisor(std::string(kPrivcmdPaths[0]) + ": " + std::strerror(first_errno));
}

DomainInfo to_domain_info(const xc_domaininfo_t& raw) {
    DomainInfo info;
    info.domid = raw.domain;
    info.dying = (raw.flags & XEN_DOMINF_dying) != 0;
    info.shutdown = (raw.flags & XEN_DOMINF_shutdown) != 0;
    // The shutdown code lives in the flags word (xen/include/public/domctl.h).
    info.shutdown_reason = static_cast<ShutdownReason>((raw.flags >> XEN_DOMINF_shutdownshift) &
                                                       XEN_DOMINF_shutdownmask);
    info.paused = (raw.flags & XEN_DOMINF_paused) != 0;
    info.hvm = (raw.flags & XEN_DOMINF_hvm_guest) != 0;
    // libxl builds PVH guests with only the local APIC emulated (plus vPCI
    // for a PVH dom0); HVM guests get the PIT, RTC, ... as well.
    constexpr uint32_t kPvhEmulation = XEN_X86_EMU_LAPIC | XEN_X86_EMU_VPCI;
    info.pvh = info.hvm && (raw.arch_config.emulation_flags & ~kPvhEmulation) == 0;
    info.tot_pages = raw.tot_pages;
    info.max_pages = raw.max_pages;
    info.shr_pages = raw.shr_pages;
    info.shared_info_frame = raw.shared_info_frame;
    // XEN_INVALID_MAX_VCPU_ID (~0) means "no vcpus"; keep it, callers loop
    // with <= and must not, so clamp to 0 and let getcontext fail.
    info.max_vcpu_id = raw.max_vcpu_id == XEN_INVALID_MAX_VCPU_ID ? 0 : raw.max_vcpu_id;
    static_assert(sizeof(raw.handle) == sizeof(info.handle));
    std::memcpy(info.handle.data(), raw.handle, sizeof(raw.handle));
    return info;
}

// A page-aligned buffer Xen may write into during a hypercall (what
// libxenctrl's DECLARE_HYPERCALL_BUFFER and xc_hypercall_buffer_alloc_pages
// make, without the macros' GNU statement expressions), freed on every path.
class HypercallPages {
public:
    HypercallPages(xc_interface* xch, size_t bytes) : xch_(xch) {
        buf_.hbuf = nullptr;
        buf_.param_shadow = nullptr;
        buf_.dir = 0;
        buf_.ubuf = reinterpret_cast<void*>(~uintptr_t{0});  // no bounce buffer (HYPERCALL_BUFFER_INIT_NO_BOUNCE)
        buf_.sz = 0;
        const size_t pages = std::max<size_t>(1, (bytes + XC_PAGE_SIZE - 1) / XC_PAGE_SIZE);
        if (pages > static_cast<size_t>(std::numeric_limits<int>::max()))
            throw Error("a hypercall buffer of " + std::to_string(bytes) + " bytes is more than libxenctrl can allocate",
                        "xen");
        pages_ = static_cast<int>(pages);
        if (!xc__hypercall_buffer_alloc_pages(xch_, &buf_, pages_))
            throw Error("cannot allocate a hypercall buffer of " + std::to_string(pages_) + " pages", "xen",
                        std::nullopt, errno);
    }
    ~HypercallPages() { xc__hypercall_buffer_free_pages(xch_, &buf_, pages_); }
    HypercallPages(const HypercallPages&) = delete;
    HypercallPages& operator=(const HypercallPages&) = delete;
    xc_hypercall_buffer_t* get() { return &buf_; }
    const std::byte* data() const { return static_cast<const std::byte*>(buf_.hbuf); }

private:
    xc_interface* xch_;
    xc_hypercall_buffer_t buf_;
    int pages_ = 0;
};

class XenForeignMapping final : public ForeignMapping {
public:
    XenForeignMapping(xenforeignmemory_handle* fmem, void* addr, std::vector<int> errors)
        : fmem_(fmem), addr_(static_cast<std::byte*>(addr)), errors_(std::move(errors)) {}
    ~XenForeignMapping() override { xenforeignmemory_unmap(fmem_, addr_, errors_.size()); }
    XenForeignMapping(const XenForeignMapping&) = delete;
    XenForeignMapping& operator=(const XenForeignMapping&) = delete;

    size_t count() const override { return errors_.size(); }
    const std::byte* page(size_t i) const override { return addr_ + i * format::kPageSize; }
    // libxenforeignmemory reports per-frame failures as negative errno values.
    int error(size_t i) const override { return errors_[i] < 0 ? -errors_[i] : errors_[i]; }

private:
    xenforeignmemory_handle* fmem_;
    std::byte* addr_;
    std::vector<int> errors_;
};

// @releaseDomain fires when any domain shuts down, crashes or dies. Each watch
// has a xenstore connection of its own so that its fd carries only its events.
class XenstoreDomainWatch final : public DomainWatch {
public:
    explicit XenstoreDomainWatch(XenstoreHandle xsh) : xsh_(std::move(xsh)) {
        if (!xs_watch(xsh_.get(), kPath, kToken))
            throw Error("cannot watch @releaseDomain in xenstore", "xen", std::nullopt, errno);
        fd_ = xs_fileno(xsh_.get());
        if (fd_ < 0) throw Error("cannot get the xenstore watch descriptor", "xen", std::nullopt, errno);
    }
    ~XenstoreDomainWatch() override { xs_unwatch(xsh_.get(), kPath, kToken); }

    int fd() const override { return fd_; }

    // xenstore.h: after the fd turns readable, call xs_check_watch until it
    // returns NULL with errno EAGAIN.
    bool consume() override {
        bool any = false;
        for (;;) {
            MallocPtr<char*> event(xs_check_watch(xsh_.get()));
            if (!event) {
                if (errno == EAGAIN) return any;
                throw Error("cannot read the xenstore watch", "xen", std::nullopt, errno);
            }
            any = true;
        }
    }

private:
    static constexpr const char* kPath = "@releaseDomain";
    static constexpr const char* kToken = "xen-dumpd";
    XenstoreHandle xsh_;
    int fd_ = -1;
};

class XenHypervisor final : public Hypervisor {
public:
    XenHypervisor() {
        check_privcmd_present();
        xch_.reset(xc_interface_open(&logger_.base, &logger_.base, 0));
        if (!xch_) throw_no_hypervisor(open_failure("libxenctrl"));
        fmem_.reset(xenforeignmemory_open(&logger_.base, 0));
        if (!fmem_) throw_no_hypervisor(open_failure("libxenforeignmemory"));
        xsh_.reset(xs_open(0));
        if (!xsh_)
            throw Error("cannot connect to xenstore (is xenstored running?)", "xen", std::nullopt, errno);
    }

    std::string describe() const override { return "xen"; }

    std::vector<DomainInfo> list_domains() override {
        std::vector<DomainInfo> out;
        constexpr unsigned kBatch = 256;
        std::vector<xc_domaininfo_t> raw(kBatch);
        uint32_t next = 0;
        for (;;) {
            int n = xc_domain_getinfolist(xch_.get(), next, kBatch, raw.data());
            if (n < 0) throw Error("cannot list domains", "xen", std::nullopt, errno);
            for (int i = 0; i < n; ++i) out.push_back(to_domain_info(raw[static_cast<size_t>(i)]));
            if (static_cast<unsigned>(n) < kBatch) break;
            next = raw[kBatch - 1].domain + 1u;
            if (next >= DOMID_FIRST_RESERVED) break;
        }
        return out;
    }

    std::optional<DomainInfo> domain_info(uint32_t domid) override {
        xc_domaininfo_t raw{};
        // getinfolist returns the first domain at or after `domid`: check it is ours.
        int n = xc_domain_getinfolist(xch_.get(), domid, 1, &raw);
        if (n < 0) throw Error("cannot get domain information", domain_object(domid), std::nullopt, errno);
        if (n == 0 || raw.domain != domid) return std::nullopt;
        return to_domain_info(raw);
    }

    std::string domain_name(uint32_t domid) override {
        std::string path = "/local/domain/" + std::to_string(domid) + "/name";
        unsigned int len = 0;
        MallocPtr<char> value(static_cast<char*>(xs_read(xsh_.get(), XBT_NULL, path.c_str(), &len)));
        if (!value) return {};
        return std::string(value.get(), len);
    }

    unsigned guest_width(uint32_t domid) override {
        unsigned int width = 0;
        if (xc_domain_get_guest_width(xch_.get(), domid, &width) != 0)
            throw Error("cannot get the guest width", domain_object(domid), std::nullopt, errno);
        return width;
    }

    uint64_t maximum_gpfn(uint32_t domid) override {
        xen_pfn_t gpfn = 0;
        if (xc_domain_maximum_gpfn(xch_.get(), domid, &gpfn) < 0)
            throw Error("cannot get the maximum gpfn", domain_object(domid), std::nullopt, errno);
        return gpfn;
    }

    // Follows xg_core.c: every vcpu 0..max_vcpu_id whose context the
    // hypervisor gives is dumped; one it refuses (ESRCH: no such vcpu,
    // ENODATA: never brought up) is skipped.
    std::optional<std::vector<std::byte>> vcpu_context(uint32_t domid, uint32_t vcpu) override {
        auto info = domain_info(domid);
        if (!info) return std::nullopt;
        vcpu_guest_context_any_t ctxt;
        std::memset(&ctxt, 0, sizeof ctxt);
        if (xc_vcpu_getcontext(xch_.get(), domid, vcpu, &ctxt) != 0) return std::nullopt;
        // 32-bit PV guests get the compat layout (the x32 member); HVM/PVH
        // and 64-bit PV the native one (xen/arch/x86/domctl.c).
        bool compat = !info->hvm && guest_width(domid) == 4;
        size_t size = compat ? sizeof(ctxt.x32) : sizeof(ctxt.x64);
        static_assert(sizeof(ctxt.x32) == format::kVcpuContextSize32);
        static_assert(sizeof(ctxt.x64) == format::kVcpuContextSize64);
        std::vector<std::byte> out(size);
        std::memcpy(out.data(), &ctxt, size);
        return out;
    }

    std::unique_ptr<ForeignMapping> map_foreign(uint32_t domid, std::span<const uint64_t> frames) override {
        std::vector<xen_pfn_t> pfns(frames.begin(), frames.end());
        std::vector<int> errors(frames.size(), 0);
        if (frames.empty()) return std::make_unique<XenForeignMapping>(fmem_.get(), nullptr, std::move(errors));
        void* addr = xenforeignmemory_map(fmem_.get(), domid, PROT_READ, pfns.size(), pfns.data(),
                                          errors.data());
        if (!addr)
            throw Error("cannot map " + std::to_string(frames.size()) + " guest frames", domain_object(domid),
                        std::nullopt, errno);
        return std::make_unique<XenForeignMapping>(fmem_.get(), addr, std::move(errors));
    }

    void pause(uint32_t domid) override {
        if (xc_domain_pause(xch_.get(), domid) != 0)
            throw Error("cannot pause the domain", domain_object(domid), std::nullopt, errno);
    }

    void unpause(uint32_t domid) override {
        if (xc_domain_unpause(xch_.get(), domid) != 0)
            throw Error("cannot unpause the domain", domain_object(domid), std::nullopt, errno);
    }

    void destroy(uint32_t domid) override {
        if (xc_domain_destroy(xch_.get(), domid) != 0)
            throw Error("cannot destroy the domain", domain_object(domid), std::nullopt, errno);
    }

    format::XenVersionDesc xen_version() override { return xen::read_xen_version(xch_.get()); }

    // XEN_DOMCTL_SHADOW_OP_ENABLE_LOGDIRTY, as xg_sr_save.c's
    // enable_logdirty(). Xen ignores paging operations on a dying domain
    // (and reports success), so that is refused here first; its EINVAL
    // does not tell "already on" from "passed-through devices", so the
    // reason names both.
    void enable_logdirty(uint32_t domid) override {
        auto info = domain_info(domid);
        if (!info) throw Error("no such domain", domain_object(domid), std::nullopt, ESRCH);
        if (info->dying)
            throw Error("log-dirty refused: the domain is dying", domain_object(domid), std::nullopt, EINVAL);
        if (xc_shadow_control(xch_.get(), domid, XEN_DOMCTL_SHADOW_OP_ENABLE_LOGDIRTY, nullptr, 0) == 0) return;
        const int e = errno;
        std::string why;
        if (e == EOPNOTSUPP)
            why = info->hvm ? "the hypervisor cannot track this guest's writes"
                            : "a PV guest needs shadow paging, which this hypervisor is built without "
                              "(CONFIG_SHADOW_PAGING)";
        else if (e == EINVAL || e == EBUSY)
            why = "log-dirty is already on (a migration or checkpoint in progress) or the domain has "
                  "passed-through PCI devices";
        else
            why = "the hypervisor refused";
        throw Error("log-dirty refused: " + why, domain_object(domid), std::nullopt, e);
    }

    uint64_t read_dirty(uint32_t domid, DirtyRead how, std::span<uint64_t> bitmap, uint64_t pages) override {
        const uint64_t words = (pages + 63) / 64;
        if (bitmap.size() < words) throw Error("internal error: dirty bitmap too small", domain_object(domid));
        // Xen writes unsigned longs, bit p of the bitmap for pfn p: the same
        // bits as u64 words on x86_64.
        HypercallPages buf(xch_.get(), words * 8);
        xc_shadow_op_stats_t stats{};
        const unsigned op = how == DirtyRead::peek ? XEN_DOMCTL_SHADOW_OP_PEEK : XEN_DOMCTL_SHADOW_OP_CLEAN;
        const unsigned mode = how == DirtyRead::final_clean ? XEN_DOMCTL_SHADOW_LOGDIRTY_FINAL : 0;
        const long long done = xc_logdirty_control(xch_.get(), domid, op, buf.get(), pages, mode, &stats);
        if (done < 0 || static_cast<uint64_t>(done) != pages)
            throw Error("cannot read the dirty bitmap (" + std::to_string(done) + " of " + std::to_string(pages) +
                            " pages)",
                        domain_object(domid), std::nullopt, errno);
        std::memcpy(bitmap.data(), buf.data(), words * 8);
        if (pages % 64) bitmap[words - 1] &= (uint64_t{1} << (pages % 64)) - 1;
        return stats.dirty_count;
    }

    // As xg_sr_save.c's write_batch() asks: kGfnTypesPerCall gfns a call
    // (the bounce buffer is libxenctrl's). XTAB (unpopulated, paged out,
    // device memory: get_page_from_gfn found no page; or a Xen heap page
    // such as shared_info in the guest's physmap) and XALLOC (a type of the
    // migration stream, which this domctl does not return) are absent;
    // BROKEN is broken; NOTAB and the page-table types, pinned or not, are
    // present memory.
    std::vector<GfnType> gfn_types(uint32_t domid, std::span<const uint64_t> gfns) override {
        std::vector<GfnType> types;
        types.reserve(gfns.size());
        std::vector<xen_pfn_t> batch;
        for (size_t done = 0; done < gfns.size(); done += batch.size()) {
            const size_t n = std::min(kGfnTypesPerCall, gfns.size() - done);
            batch.assign(gfns.begin() + static_cast<std::ptrdiff_t>(done),
                         gfns.begin() + static_cast<std::ptrdiff_t>(done + n));
            if (xc_get_pfn_type_batch(xch_.get(), domid, static_cast<unsigned>(n), batch.data()) != 0) {
                const int e = errno;
                char first[24];
                std::snprintf(first, sizeof first, "%#llx", static_cast<unsigned long long>(gfns[done]));
                throw Error("cannot get the page types of " + std::to_string(n) + " gfns from gfn " + first,
                            domain_object(domid), std::nullopt, e);
            }
            for (xen_pfn_t type : batch) {
                switch (type & XEN_DOMCTL_PFINFO_LTAB_MASK) {
                case XEN_DOMCTL_PFINFO_XTAB:
                case XEN_DOMCTL_PFINFO_XALLOC:
                    types.push_back(GfnType::absent);
                    break;
                case XEN_DOMCTL_PFINFO_BROKEN:
                    types.push_back(GfnType::broken);
                    break;
                default:
                    types.push_back(GfnType::present);
                }
            }
        }
        return types;
    }

    void disable_logdirty(uint32_t domid) override {
        if (xc_shadow_control(xch_.get(), domid, XEN_DOMCTL_SHADOW_OP_OFF, nullptr, 0) != 0)
            throw Error("cannot turn log-dirty off", domain_object(domid), std::nullopt, errno);
    }

    std::unique_ptr<DomainWatch> watch_domains() override {
        XenstoreHandle watch_xsh(xs_open(0));
        if (!watch_xsh)
            throw Error("cannot connect to xenstore (is xenstored running?)", "xen", std::nullopt, errno);
        return std::make_unique<XenstoreDomainWatch>(std::move(watch_xsh));
    }

private:
    std::string open_failure(const char* library) const {
        int saved = errno;
        if (std::string message = logger_.last_message(); !message.empty()) return std::string(library) + ": " + message;
        return std::string(library) + ": " + std::strerror(saved);
    }

    // Declared first: destroyed last, after the handles that log through it.
    QuietLogger logger_;
    XcHandle xch_;
    ForeignMemoryHandle fmem_;
    XenstoreHandle xsh_;
};

}  // namespace

std::unique_ptr<Hypervisor> open_xen_backend() { return std::make_unique<XenHypervisor>(); }

}  // namespace xendump
