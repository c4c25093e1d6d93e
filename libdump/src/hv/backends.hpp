#pragma once

#include <filesystem>
#include <memory>

#include "xendump/hypervisor.hpp"

namespace xendump {
std::unique_ptr<Hypervisor> open_xen_backend();
std::unique_ptr<Hypervisor> open_sim_backend(const std::filesystem::path& dir);
}  // namespace xendump
