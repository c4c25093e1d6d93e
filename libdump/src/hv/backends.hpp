// The two backends behind open_hypervisor() (private to libdump).
#pragma once

#include <filesystem>
#include <memory>

#include "xendump/hypervisor.hpp"

namespace xendump {

// libxenctrl + libxenforeignmemory + xenstore (libdump/src/xen); throws Error
// with one clear line when there is no hypervisor or no libxen in this build.
std::unique_ptr<Hypervisor> open_xen_backend();
// The simulated host kept in `dir` (libdump/src/sim, simulated-host.md).
std::unique_ptr<Hypervisor> open_sim_backend(const std::filesystem::path& dir);

}  // namespace xendump
