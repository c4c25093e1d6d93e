// The real backend where there is no hypervisor (this machine, CI): opening
// "xen" must fail with one clear line, never crash or print libxen noise.
#include <gtest/gtest.h>

#include <unistd.h>

#include "hv/backends.hpp"
#include "xendump_config.h"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump::test {
namespace {

bool on_xen() { return access("/dev/xen/privcmd", F_OK) == 0 || access("/proc/xen/privcmd", F_OK) == 0; }

TEST(XenBackend, OpenWithoutHypervisorIsOneClearLine) {
    if (on_xen()) GTEST_SKIP() << "this machine has a Xen privcmd device";
    testing::internal::CaptureStderr();
    try {
        open_hypervisor("xen");
        testing::internal::GetCapturedStderr();
        FAIL() << "opening \"xen\" succeeded without a hypervisor";
    } catch (const Error& e) {
        std::string err = testing::internal::GetCapturedStderr();
        std::string what = e.what();
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        EXPECT_TRUE(err.empty()) << "libxen wrote to stderr: " << err;
#if XENDUMP_HAVE_XEN
        EXPECT_NE(what.find("cannot open the Xen hypervisor interface"), std::string::npos) << what;
        EXPECT_NE(what.find("/dev/xen/privcmd"), std::string::npos) << what;
        EXPECT_NE(what.find("dom0"), std::string::npos) << what;
#else
        EXPECT_NE(what.find("no Xen support"), std::string::npos) << what;
#endif
    }
}

TEST(XenBackend, DefaultHostIsXen) {
    if (on_xen()) GTEST_SKIP() << "this machine has a Xen privcmd device";
    unsetenv("XEN_DUMP_HOST");
    EXPECT_THROW(open_hypervisor(), Error);
    EXPECT_THROW(open_xen_backend(), Error);
}

}  // namespace
}  // namespace xendump::test
