// A hypervisor that hands every call to another one: the base of the views
// that watch or stop some calls on their way (the dumper's cancellable view,
// the tests' counters). A virtual added to Hypervisor is forwarded here,
// once, so no view silently falls back to Hypervisor's default for it.
#pragma once

#include "xendump/hypervisor.hpp"

namespace xendump {

class ForwardingHypervisor : public Hypervisor {
public:
    explicit ForwardingHypervisor(Hypervisor& inner) : inner_(inner) {}

    std::string describe() const override { return inner_.describe(); }
    std::vector<DomainInfo> list_domains() override { return inner_.list_domains(); }
    std::optional<DomainInfo> domain_info(uint32_t domid) override { return inner_.domain_info(domid); }
    std::string domain_name(uint32_t domid) override { return inner_.domain_name(domid); }
    std::optional<uint32_t> find_domain_by_name(std::string_view name) override {
        return inner_.find_domain_by_name(name);
    }
    unsigned guest_width(uint32_t domid) override { return inner_.guest_width(domid); }
    uint64_t maximum_gpfn(uint32_t domid) override { return inner_.maximum_gpfn(domid); }
    std::optional<std::vector<std::byte>> vcpu_context(uint32_t domid, uint32_t vcpu) override {
        return inner_.vcpu_context(domid, vcpu);
    }
    std::unique_ptr<ForeignMapping> map_foreign(uint32_t domid, std::span<const uint64_t> frames) override {
        return inner_.map_foreign(domid, frames);
    }
    void pause(uint32_t domid) override { inner_.pause(domid); }
    void unpause(uint32_t domid) override { inner_.unpause(domid); }
    void destroy(uint32_t domid) override { inner_.destroy(domid); }
    format::XenVersionDesc xen_version() override { return inner_.xen_version(); }
    std::unique_ptr<DomainWatch> watch_domains() override { return inner_.watch_domains(); }
    void enable_logdirty(uint32_t domid) override { inner_.enable_logdirty(domid); }
    uint64_t read_dirty(uint32_t domid, DirtyRead how, std::span<uint64_t> bitmap, uint64_t pages) override {
        return inner_.read_dirty(domid, how, bitmap, pages);
    }
    void disable_logdirty(uint32_t domid) override { inner_.disable_logdirty(domid); }
    std::vector<GfnType> gfn_types(uint32_t domid, std::span<const uint64_t> gfns) override {
        return inner_.gfn_types(domid, gfns);
    }

private:
    Hypervisor& inner_;
};

}  // namespace xendump
