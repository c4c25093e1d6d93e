// Crash signatures (issue 34 item 5): one crash on two hosts and two builds
// of its kernel has one signature; different panics, or the same panic
// reached through other functions, have different ones. The panics are the
// Xen lab's real one (sysrq on Linux 6.1) and the usual shapes of others.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "crash_signature.hpp"
#include "sidecar.hpp"

namespace xendump::daemon {
namespace {

GuestBacktrace trace(std::vector<std::string> frames) {
    GuestBacktrace b;
    b.method = "orc";
    b.frames = std::move(frames);
    return b;
}

// The lab's crashed guest (tests/xen-lab), as the service recorded it.
const std::string kLabPanic = "[    8.197049] Kernel panic - not syncing: sysrq triggered crash";
const GuestBacktrace kLabTrace = trace({"xen_hypercall_pv+0x5", "xen_reboot+0x60", "panic+0x286",
                                        "sysrq_handle_crash+0x16", "__handle_sysrq.cold+0x44",
                                        "write_sysrq_trigger+0x24", "proc_reg_write+0x56", "vfs_write+0xc7"});

TEST(CrashSignature, TheSameCrashOnAnotherHostAndBuildHasTheSameSignature) {
    const auto here = crash_signature(kLabPanic, kLabTrace);
    ASSERT_TRUE(here);
    EXPECT_EQ(here->size(), 16u);
    EXPECT_EQ(here->find_first_not_of("0123456789abcdef"), std::string::npos) << *here;
    // Another boot's time, another build's offsets, an unreliable frame in between.
    const auto there = crash_signature("[ 4711.000001] Kernel panic - not syncing: sysrq triggered crash",
                                       trace({"xen_hypercall_pv+0x9", "? fixup_irqs+0x12/0x40", "xen_reboot+0x70",
                                              "panic+0x2a6/0x3c0", "sysrq_handle_crash+0x1a",
                                              "__handle_sysrq.cold+0x48", "write_sysrq_trigger+0x2c",
                                              "ksys_write+0x6b"}));
    EXPECT_EQ(here, there);
    // Frames past the sixth reliable one do not count.
    EXPECT_EQ(crash_signature_text(kLabPanic, kLabTrace),
              "Kernel panic - not syncing: sysrq triggered crash\nxen_hypercall_pv\nxen_reboot\npanic\n"
              "sysrq_handle_crash\n__handle_sysrq.cold\nwrite_sysrq_trigger\n");
}

TEST(CrashSignature, NumbersAddressesPidsAndCpusAreLeftOut) {
    EXPECT_EQ(crash_signature_text("[   12.5] BUG: unable to handle page fault for address: ffff888012345678", {}),
              "BUG: unable to handle page fault for address: #\n");
    EXPECT_EQ(crash_signature("[ 1.0] BUG: unable to handle page fault for address: ffff888012345678", {}),
              crash_signature("[ 2.0] BUG: unable to handle page fault for address: ffffc90000abcdef", {}));
    EXPECT_EQ(crash_signature_text("[ 3.0] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000009", {}),
              "Kernel panic - not syncing: Attempted to kill init! exitcode=#\n");
    EXPECT_EQ(crash_signature("CPU: 1 PID: 4321 Comm: bash Not tainted", {}),
              crash_signature("CPU: 3 PID: 17 Comm: bash Not tainted", {}));
    // Names that hold digits are names.
    EXPECT_EQ(crash_signature_text("EXT4-fs error (device xvda1): ext4_find_entry:1658: inode #2", {}),
              "EXT4-fs error (device xvda1): ext4_find_entry:#: inode ##\n");
}

TEST(CrashSignature, DifferentPanicsOrPathsHaveDifferentSignatures) {
    const auto sysrq = crash_signature(kLabPanic, kLabTrace);
    EXPECT_NE(sysrq, crash_signature("[ 8.1] Kernel panic - not syncing: Attempted to kill init! exitcode=0x9", kLabTrace));
    EXPECT_NE(sysrq, crash_signature("[ 8.1] Kernel panic - not syncing: Fatal exception", kLabTrace));
    // The same message reached from another caller.
    EXPECT_NE(sysrq, crash_signature(kLabPanic, trace({"xen_hypercall_pv+0x5", "xen_reboot+0x60", "panic+0x286",
                                                       "watchdog_timer_fn+0x2a0", "__hrtimer_run_queues+0x12a"})));
    // Without a backtrace the message alone is signed: not the same as with one.
    EXPECT_NE(sysrq, crash_signature(kLabPanic, std::nullopt));
}

TEST(CrashSignature, NoPanicLineNoSignatureAndTheSidecarCarriesIt) {
    EXPECT_FALSE(crash_signature(std::nullopt, kLabTrace));
    EXPECT_FALSE(crash_signature(std::string(), kLabTrace));
    Sidecar s;
    s.domain_name = "crash";
    s.result = DumpOutcome::ok;
    s.guest_log = GuestLog{};
    EXPECT_FALSE(nlohmann::json::parse(s.to_json()).contains("crash_signature"));
    s.guest_panic = kLabPanic;
    s.guest_backtrace = kLabTrace;
    const auto j = nlohmann::json::parse(s.to_json());
    ASSERT_TRUE(j.contains("crash_signature")) << s.to_json();
    EXPECT_EQ(j["crash_signature"], *crash_signature(s));
}

}  // namespace
}  // namespace xendump::daemon
