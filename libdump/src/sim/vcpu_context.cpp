#include "sim/vcpu_context.hpp"

#include <cstring>
#include <stdexcept>

#include "sim/guest_abi.hpp"
#include "sim/pattern.hpp"

namespace xendump::sim {

namespace {

void put(std::vector<std::byte>& buf, size_t offset, uint64_t value, unsigned size) {
    if (offset > buf.size() || buf.size() - offset < size) throw std::logic_error("vcpu context field out of range");
    if (size == 2) {
        uint16_t v = static_cast<uint16_t>(value);
        std::memcpy(buf.data() + offset, &v, 2);
    } else if (size == 4) {
        uint32_t v = static_cast<uint32_t>(value);
        std::memcpy(buf.data() + offset, &v, 4);
    } else {
        std::memcpy(buf.data() + offset, &value, 8);
    }
}

// Where each register lives in the context of a 64-bit and a 32-bit guest.
struct RegLayout {
    size_t user_regs, kernel_ss, ctrlreg;
    size_t ax, bx, cx, dx, si, di, bp, ip, cs, flags, sp, ss;
    uint16_t kernel_cs, kernel_ss_selector;
};

constexpr RegLayout kLayout64 = {
    abi::kUserRegs64, abi::kKernelSs64, abi::kCtrlreg64,
    abi::regs64::rax, abi::regs64::rbx, abi::regs64::rcx, abi::regs64::rdx, abi::regs64::rsi, abi::regs64::rdi,
    abi::regs64::rbp, abi::regs64::rip, abi::regs64::cs, abi::regs64::rflags, abi::regs64::rsp, abi::regs64::ss,
    abi::kFlatKernelCs64, abi::kFlatKernelSs64};
constexpr RegLayout kLayout32 = {
    abi::kUserRegs32, abi::kKernelSs32, abi::kCtrlreg32,
    abi::regs32::eax, abi::regs32::ebx, abi::regs32::ecx, abi::regs32::edx, abi::regs32::esi, abi::regs32::edi,
    abi::regs32::ebp, abi::regs32::eip, abi::regs32::cs, abi::regs32::eflags, abi::regs32::esp, abi::regs32::ss,
    abi::kFlatKernelCs32, abi::kFlatKernelSs32};

}  // namespace

uint64_t simulated_rip(uint32_t domid, uint32_t vcpu, unsigned width) {
    // Inside a kernel text area, distinct per domain and vcpu.
    uint64_t base = width == 8 ? 0xffffffff81000000ULL : 0xc1000000ULL;
    return base + (uint64_t{domid} << 16) + (uint64_t{vcpu} << 4);
}

std::vector<std::byte> build_vcpu_context(uint32_t domid, uint32_t vcpu, unsigned width, bool pv, uint64_t cr3) {
    const bool wide = width == 8;
    std::vector<std::byte> ctx(wide ? abi::kVcpuContextSize64 : abi::kVcpuContextSize32, std::byte{0});
    const uint64_t seed = (uint64_t{domid} << 32) | vcpu;
    auto reg = [&](unsigned n) {
        uint64_t v = splitmix64(seed * 16 + n);
        return wide ? v : (v & 0xffffffffULL);
    };
    put(ctx, abi::kVcpuFlags, abi::kVgcfOnline | (pv ? abi::kVgcfInKernel : 0), wide ? 8 : 4);
    const uint64_t ip_value = simulated_rip(domid, vcpu, width);
    const uint64_t sp_value = (wide ? 0xffffc90000400000ULL : 0xc2000000ULL) + (uint64_t{vcpu} << 14) - 0x100;
    const RegLayout& l = wide ? kLayout64 : kLayout32;
    const unsigned w = wide ? 8 : 4;
    const size_t r = l.user_regs;
    const size_t general[] = {l.ax, l.bx, l.cx, l.dx, l.si, l.di};
    for (unsigned n = 0; n < 6; ++n) put(ctx, r + general[n], reg(n), w);
    put(ctx, r + l.bp, sp_value + 0x80, w);
    put(ctx, r + l.ip, ip_value, w);
    put(ctx, r + l.cs, pv || !wide ? l.kernel_cs : 0x10, 2);
    put(ctx, r + l.flags, 0x246, w);
    put(ctx, r + l.sp, sp_value, w);
    put(ctx, r + l.ss, pv || !wide ? l.kernel_ss_selector : 0x18, 2);
    put(ctx, l.kernel_ss, l.kernel_ss_selector, w);
    put(ctx, l.kernel_ss + w, sp_value, w);
    put(ctx, l.ctrlreg + 0 * w, 0x80050033, w);  // cr0: PE MP ET NE WP AM PG
    put(ctx, l.ctrlreg + 3 * w, cr3, w);
    put(ctx, l.ctrlreg + 4 * w, 0x6f0, w);
    return ctx;
}

}  // namespace xendump::sim
