#include "xen/xen_version.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <xen/version.h>

#include "xendump/error.hpp"

namespace xendump::xen {

namespace {

// Copies a NUL-terminated string the hypervisor returned into a fixed field,
// always leaving the field NUL-terminated.
template <size_t N, size_t M>
void copy_field(char (&to)[N], const char (&from)[M]) {
    static_assert(N > 0);
    size_t len = strnlen(from, M);
    len = std::min(len, N - 1);
    std::memcpy(to, from, len);
    to[len] = '\0';
}

}  // namespace

format::XenVersionDesc read_xen_version(xc_interface* xch) {
    format::XenVersionDesc desc{};

    // XENVER_version returns (major << 16) | minor instead of 0 (xen/version.h).
    int version = xc_version(xch, XENVER_version, nullptr);
    if (version < 0) throw Error("cannot read the Xen version (XENVER_version)", "xen", std::nullopt, errno);
    desc.major_version = static_cast<unsigned>(version) >> 16;
    desc.minor_version = static_cast<unsigned>(version) & 0xffff;

    // The other queries are informational: a failure leaves the field empty.
    xen_extraversion_t extra{};
    if (xc_version(xch, XENVER_extraversion, &extra) == 0) copy_field(desc.extra_version, extra);

    xen_compile_info_t compile{};
    if (xc_version(xch, XENVER_compile_info, &compile) == 0) {
        copy_field(desc.compiler, compile.compiler);
        copy_field(desc.compile_by, compile.compile_by);
        copy_field(desc.compile_domain, compile.compile_domain);
        copy_field(desc.compile_date, compile.compile_date);
    }

    xen_capabilities_info_t caps{};
    if (xc_version(xch, XENVER_capabilities, &caps) == 0) copy_field(desc.capabilities, caps);

    xen_changeset_info_t changeset{};
    if (xc_version(xch, XENVER_changeset, &changeset) == 0) copy_field(desc.changeset, changeset);

    xen_platform_parameters_t platform{};
    if (xc_version(xch, XENVER_platform_parameters, &platform) == 0)
        desc.platform_virt_start = platform.virt_start;

    int pagesize = xc_version(xch, XENVER_pagesize, nullptr);
    desc.pagesize = pagesize > 0 ? static_cast<uint64_t>(pagesize) : format::kPageSize;
    return desc;
}

}  // namespace xendump::xen
