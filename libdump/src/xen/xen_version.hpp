// The hypervisor's version and build information as the DUMPCORE_XEN_VERSION
// note carries it (Xen's docs/misc/dump-core-format.txt).
#pragma once

#include "xen/xen_handles.hpp"

#include "xendump/format.hpp"

namespace xendump::xen {

// Throws Error when the hypervisor refuses XENVER_version.
format::XenVersionDesc read_xen_version(xc_interface* xch);

}  // namespace xendump::xen
