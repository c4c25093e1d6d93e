// The spec a dump file was written with, for writing the same guest again:
// the converter's v1 -> compact, and a consistent live dump's image made
// into its final form (dump/live_image.hpp). Its notes as they are; the
// writer adds NR_PAGES= and VCPUS= again, and finds the guest kernel again.
#pragma once

#include "xendump/dump_spec.hpp"
#include "xendump/reader.hpp"

namespace xendump::reader {

inline DumpSpec spec_of(const DumpReader& reader) {
    DumpSpec spec;
    spec.type = reader.type();
    spec.guest_width = reader.guest_width();
    spec.domain = reader.domain();
    spec.vcpus = reader.vcpus();
    spec.xen_version = reader.xen_version();
    spec.shared_info = reader.shared_info();
    spec.vmcoreinfo = reader.vmcoreinfo();
    return spec;
}

}  // namespace xendump::reader
