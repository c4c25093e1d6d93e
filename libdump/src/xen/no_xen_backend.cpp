// Built instead of the libxen backend when libxen-dev was missing at
// configure time: the "xen" host exists but always says why it cannot open.
#include "hv/backends.hpp"
#include "xendump/error.hpp"

namespace xendump {

std::unique_ptr<Hypervisor> open_xen_backend() {
    throw Error("this build has no Xen support (built without libxen-dev)", "xen");
}

}  // namespace xendump
