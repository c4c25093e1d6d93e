// vcpu_guest_context (x86_64) -> elf_prstatus: every register lands in its slot.
#include "xendump/kernel/prstatus.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "xendump/error.hpp"

#if __has_include(<xen/xen.h>)
#define __XEN_TOOLS__ 1
#include <xen/xen.h>
#define HAVE_XEN_HEADERS 1
#endif

using namespace xendump;
using namespace xendump::kernel;

TEST(Prstatus, ShortContextIsAnError) {
    VcpuContext v{2, std::vector<std::byte>(2800)};  // a 32-bit PV context
    try {
        prstatus_notes(std::span(&v, 1), format::GuestType::pv);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), "vcpu 2");
        EXPECT_NE(e.message().find("2800"), std::string::npos) << e.what();
    }
}

TEST(Prstatus, StructLayoutIsLinuxs) {
    EXPECT_EQ(sizeof(ElfPrstatusX86_64), 336u);
    EXPECT_EQ(offsetof(ElfPrstatusX86_64, pr_cursig), 12u);
    EXPECT_EQ(offsetof(ElfPrstatusX86_64, pr_sigpend), 16u);
    EXPECT_EQ(offsetof(ElfPrstatusX86_64, pr_utime), 48u);
    EXPECT_EQ(offsetof(ElfPrstatusX86_64, pr_cstime), 96u);
    EXPECT_EQ(offsetof(ElfPrstatusX86_64, pr_reg) + offsetof(ElfPrstatusX86_64::Regs, ip), 112u + 16 * 8);
    EXPECT_EQ(offsetof(ElfPrstatusX86_64, pr_reg) + offsetof(ElfPrstatusX86_64::Regs, gs), 112u + 26 * 8);
}

#ifdef HAVE_XEN_HEADERS

namespace {

uint64_t at(const std::vector<std::byte>& b, size_t off) {
    uint64_t v;
    std::memcpy(&v, b.data() + off, 8);
    return v;
}

// user_regs_struct order (arch/x86/include/asm/user_64.h), slot i at 112 + 8*i.
enum Slot { r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip,
            cs, flags, sp, ss, fs_base, gs_base, ds, es, fs, gs, kSlots };
constexpr size_t kRegs = 112;

struct Context {
    std::vector<std::byte> bytes = std::vector<std::byte>(5168);
    void put(size_t off, uint64_t v, size_t size = 8) { std::memcpy(bytes.data() + off, &v, size); }
};

// A context whose every register is distinct, written at the offsets given
// by Xen's own header when available (independent of the library's constants).
Context sample(uint64_t flags, uint16_t cs) {
    Context c;
    static_assert(sizeof(vcpu_guest_context_t) == 5168);
#define OFF(f) offsetof(vcpu_guest_context_t, f)
    c.put(OFF(user_regs.r15), 0x1515);
    c.put(OFF(user_regs.r14), 0x1414);
    c.put(OFF(user_regs.r13), 0x1313);
    c.put(OFF(user_regs.r12), 0x1212);
    c.put(OFF(user_regs.rbp), 0xb0b0);
    c.put(OFF(user_regs.rbx), 0xbbbb);
    c.put(OFF(user_regs.r11), 0x1111);
    c.put(OFF(user_regs.r10), 0x1010);
    c.put(OFF(user_regs.r9), 0x0909);
    c.put(OFF(user_regs.r8), 0x0808);
    c.put(OFF(user_regs.rax), 0xaaaa);
    c.put(OFF(user_regs.rcx), 0xcccc);
    c.put(OFF(user_regs.rdx), 0xdddd);
    c.put(OFF(user_regs.rsi), 0x5151);
    c.put(OFF(user_regs.rdi), 0xd1d1);
    c.put(OFF(user_regs.error_code), 0xee, 4);
    c.put(OFF(user_regs.entry_vector), 0x0e, 4);
    c.put(OFF(user_regs.rip), 0xffffffff81234567);
    c.put(OFF(user_regs.cs), cs, 2);
    c.put(OFF(user_regs.saved_upcall_mask), 1, 1);
    c.put(OFF(user_regs.rflags), 0x246);
    c.put(OFF(user_regs.rsp), 0xffffc90000123ff8);
    c.put(OFF(user_regs.ss), 0x2b, 2);
    c.put(OFF(user_regs.es), 0x11, 2);
    c.put(OFF(user_regs.ds), 0x12, 2);
    c.put(OFF(user_regs.fs), 0x13, 2);
    c.put(OFF(user_regs.gs), 0x14, 2);
    c.put(OFF(flags), flags);
    c.put(OFF(ctrlreg) + 3 * 8, 0x1234000);
    c.put(OFF(fs_base), 0x7f0000001000);
    c.put(OFF(gs_base_kernel), 0xffff88807fc00000);
    c.put(OFF(gs_base_user), 0x7f0000002000);
    return c;
#undef OFF
}

}  // namespace

TEST(Prstatus, LibraryOffsetsMatchXenHeaders) {
    EXPECT_EQ(XenVcpuContextX86_64::kFlags, offsetof(vcpu_guest_context_t, flags));
    EXPECT_EQ(XenVcpuContextX86_64::kUserRegs, offsetof(vcpu_guest_context_t, user_regs));
    EXPECT_EQ(XenVcpuContextX86_64::kCtrlreg, offsetof(vcpu_guest_context_t, ctrlreg));
    EXPECT_EQ(XenVcpuContextX86_64::kCtrlreg + 24, 5008u);  // cr3
    EXPECT_EQ(XenVcpuContextX86_64::kFsBase, offsetof(vcpu_guest_context_t, fs_base));
    EXPECT_EQ(XenVcpuContextX86_64::kGsBaseKernel, offsetof(vcpu_guest_context_t, gs_base_kernel));
    EXPECT_EQ(XenVcpuContextX86_64::kGsBaseUser, offsetof(vcpu_guest_context_t, gs_base_user));
    EXPECT_EQ(XenVcpuContextX86_64::kFlagInKernel, uint64_t{VGCF_in_kernel});
}

TEST(Prstatus, EveryRegisterInItsSlot) {
    auto ctx = sample(VGCF_in_kernel | VGCF_online, 0xe033);
    VcpuContext v{3, ctx.bytes};
    auto notes = prstatus_notes(std::span(&v, 1), format::GuestType::pv);
    ASSERT_EQ(notes.size(), 1u);
    const auto& b = notes[0];
    ASSERT_EQ(b.size(), 336u);
    const uint64_t want[kSlots] = {
        0x1515, 0x1414, 0x1313, 0x1212, 0xb0b0, 0xbbbb, 0x1111, 0x1010, 0x0909, 0x0808, 0xaaaa,
        0xcccc, 0xdddd, 0x5151, 0xd1d1, ~uint64_t{0}, 0xffffffff81234567, 0xe033, 0x246,
        0xffffc90000123ff8, 0x2b, 0x7f0000001000, 0xffff88807fc00000, 0x12, 0x11, 0x13, 0x14};
    for (size_t i = 0; i < kSlots; ++i) EXPECT_EQ(at(b, kRegs + 8 * i), want[i]) << "slot " << i;
    int32_t pid;
    std::memcpy(&pid, b.data() + 32, 4);
    EXPECT_EQ(pid, 4);  // vcpu id + 1
    // Everything outside pr_pid and pr_reg is zero (pr_info, signals, times, pr_fpvalid).
    for (size_t i = 0; i < 32; ++i) EXPECT_EQ(b[i], std::byte{0}) << i;
    for (size_t i = 36; i < kRegs; ++i) EXPECT_EQ(b[i], std::byte{0}) << i;
    for (size_t i = 328; i < 336; ++i) EXPECT_EQ(b[i], std::byte{0}) << i;
}

TEST(Prstatus, GsBaseFollowsTheVcpuMode) {
    struct Case {
        format::GuestType type;
        uint64_t flags;
        uint16_t cs;
        uint64_t gs_base;
    } cases[] = {
        {format::GuestType::pv, VGCF_in_kernel, 0xe033, 0xffff88807fc00000},  // PV kernel (ring 3)
        {format::GuestType::pv, 0, 0xe033, 0x7f0000002000},                 // PV user
        {format::GuestType::hvm, 0, 0x10, 0xffff88807fc00000},              // HVM ring 0
        {format::GuestType::hvm, 0, 0x33, 0x7f0000002000},                  // HVM ring 3
        {format::GuestType::pvh, 0, 0x10, 0xffff88807fc00000},
    };
    for (const auto& c : cases) {
        auto ctx = XenVcpuContextX86_64::decode(sample(c.flags, c.cs).bytes);
        auto p = prstatus_from_context(0, ctx, c.type);
        EXPECT_EQ(p.pr_reg.gs_base, c.gs_base) << format::to_string(c.type) << " cs " << c.cs;
    }
}

TEST(Prstatus, DecodeReadsControlRegistersAndFlags) {
    auto ctx = XenVcpuContextX86_64::decode(sample(VGCF_online, 0x10).bytes);
    EXPECT_EQ(ctx.ctrlreg[3], 0x1234000u);
    EXPECT_EQ(ctx.flags, uint64_t{VGCF_online});
    EXPECT_EQ(ctx.error_code, 0xeeu);
    EXPECT_EQ(ctx.entry_vector, 0x0eu);
    EXPECT_EQ(ctx.saved_upcall_mask, 1u);
}
#endif  // HAVE_XEN_HEADERS
