// The backend-independent parts of the hypervisor interface.
#include "xendump/hypervisor.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "hv/backends.hpp"
#include "xendump/error.hpp"

namespace xendump {

std::string uuid_to_string(const std::array<uint8_t, 16>& h) {
    char buf[37];
    std::snprintf(buf, sizeof buf, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", h[0], h[1],
                  h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]);
    return buf;
}

std::optional<uint32_t> Hypervisor::find_domain_by_name(std::string_view name) {
    for (const DomainInfo& d : list_domains())
        if (domain_name(d.domid) == name) return d.domid;
    return std::nullopt;
}

// simulated-host.md "Selecting a host": xen (default) or sim:DIR, also from
// $XEN_DUMP_HOST.
std::unique_ptr<Hypervisor> open_hypervisor(std::string_view host) {
    std::string spec(host);
    if (spec.empty()) {
        const char* env = std::getenv("XEN_DUMP_HOST");
        spec = env && *env ? env : "xen";
    }
    if (spec == "xen") return open_xen_backend();
    if (spec.rfind("sim:", 0) == 0) {
        std::string dir = spec.substr(4);
        if (dir.empty()) throw Error("host \"sim:\" names no directory (expected sim:DIR)");
        return open_sim_backend(dir);
    }
    throw Error("unknown host \"" + spec + "\" (expected \"xen\" or \"sim:DIR\")");
}

namespace {

// What a backend cannot do, refused as Xen refuses it (EOPNOTSUPP).
[[noreturn]] void unsupported(const Hypervisor& hv, const std::string& what, uint32_t domid) {
    throw Error(what + " not supported by the " + hv.describe() + " backend", "domain " + std::to_string(domid),
                std::nullopt, EOPNOTSUPP);
}

}  // namespace

void Hypervisor::enable_logdirty(uint32_t domid) { unsupported(*this, "log-dirty mode is", domid); }

uint64_t Hypervisor::read_dirty(uint32_t domid, DirtyRead, std::span<uint64_t>, uint64_t) {
    unsupported(*this, "log-dirty mode is", domid);
}

void Hypervisor::disable_logdirty(uint32_t) {}

std::vector<GfnType> Hypervisor::gfn_types(uint32_t domid, std::span<const uint64_t>) {
    unsupported(*this, "page types are", domid);
}

LogDirtyGuard::LogDirtyGuard(Hypervisor& hv, uint32_t domid) : hv_(hv), domid_(domid) {
    hv_.enable_logdirty(domid_);
    on_ = true;
}

LogDirtyGuard::~LogDirtyGuard() {
    try {
        release();
    } catch (...) {
        // The domain may be gone: Xen dropped its log-dirty state with it.
    }
}

void LogDirtyGuard::release() {
    if (!on_) return;
    on_ = false;
    hv_.disable_logdirty(domid_);
}

PausedDomain::PausedDomain(Hypervisor& hv, uint32_t domid) : hv_(hv), domid_(domid) {
    auto info = hv_.domain_info(domid_);
    if (!info) throw Error("no such domain", "domain " + std::to_string(domid_));
    // Paused already (the operator, another dump): pause again all the same.
    // Pauses nest, so the other holder's unpause leaves this one in force.
    paused_before_ = info->paused;
    hv_.pause(domid_);
    ours_ = true;
}

PausedDomain::~PausedDomain() {
    try {
        release();
    } catch (...) {
        // The domain may have been destroyed meanwhile; nothing is left to unpause.
    }
}

void PausedDomain::release() {
    if (!ours_) return;
    ours_ = false;
    hv_.unpause(domid_);
}

}  // namespace xendump
