// xendump/simulated_host.hpp: the public face of SimHost.
#include "xendump/simulated_host.hpp"

#include "sim/sim_host.hpp"

namespace xendump {

struct SimulatedHost::Impl {
    explicit Impl(const std::filesystem::path& dir) : host(dir) {}
    sim::SimHost host;
};

void SimulatedHost::create(const std::filesystem::path& dir, const std::filesystem::path& spec_file) {
    sim::SimHost::create(dir, spec_file);
}

void SimulatedHost::add(const std::filesystem::path& dir, const std::filesystem::path& spec_file) {
    sim::SimHost::add(dir, spec_file);
}

SimulatedHost::SimulatedHost(const std::filesystem::path& dir) : impl_(std::make_unique<Impl>(dir)) {}
SimulatedHost::SimulatedHost(SimulatedHost&&) noexcept = default;
SimulatedHost& SimulatedHost::operator=(SimulatedHost&&) noexcept = default;
SimulatedHost::~SimulatedHost() = default;

std::vector<uint32_t> SimulatedHost::domids() const { return impl_->host.domids(); }

std::optional<uint32_t> SimulatedHost::find_domain(std::string_view name) const {
    for (uint32_t domid : impl_->host.domids())
        if (impl_->host.find(domid)->spec().name == name && !impl_->host.state(domid)->destroyed) return domid;
    return std::nullopt;
}

void SimulatedHost::crash(uint32_t domid) { impl_->host.crash(domid); }
void SimulatedHost::shutdown(uint32_t domid, ShutdownReason reason) { impl_->host.shutdown(domid, reason); }
void SimulatedHost::destroy(uint32_t domid) { impl_->host.destroy(domid); }
void SimulatedHost::pause(uint32_t domid) { impl_->host.pause(domid); }
void SimulatedHost::unpause(uint32_t domid) { impl_->host.unpause(domid); }
void SimulatedHost::balloon(uint32_t domid, uint64_t pfn, uint64_t count) { impl_->host.balloon(domid, pfn, count); }
void SimulatedHost::unballoon(uint32_t domid, uint64_t pfn, uint64_t count) {
    impl_->host.unballoon(domid, pfn, count);
}

std::string SimulatedHost::list_json(int indent) const { return impl_->host.list_json().dump(indent); }
std::string SimulatedHost::info_json(uint32_t domid, int indent) const {
    return impl_->host.info_json(domid).dump(indent);
}

}  // namespace xendump
