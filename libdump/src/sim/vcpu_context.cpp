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
    if (wide) {
        const size_t r = abi::kUserRegs64;
        using namespace abi::regs64;
        put(ctx, r + rax, reg(0), 8);
        put(ctx, r + rbx, reg(1), 8);
        put(ctx, r + rcx, reg(2), 8);
        put(ctx, r + rdx, reg(3), 8);
        put(ctx, r + rsi, reg(4), 8);
        put(ctx, r + rdi, reg(5), 8);
        put(ctx, r + rbp, sp_value + 0x80, 8);
        put(ctx, r + rip, ip_value, 8);
        put(ctx, r + cs, pv ? abi::kFlatKernelCs64 : 0x10, 2);
        put(ctx, r + rflags, 0x246, 8);
        put(ctx, r + rsp, sp_value, 8);
        put(ctx, r + ss, pv ? abi::kFlatKernelSs64 : 0x18, 2);
        put(ctx, abi::kKernelSs64, abi::kFlatKernelSs64, 8);
        put(ctx, abi::kKernelSs64 + 8, sp_value, 8);
        put(ctx, abi::kCtrlreg64 + 0 * 8, 0x80050033, 8);  // PE MP ET NE WP AM PG
        put(ctx, abi::kCtrlreg64 + 3 * 8, cr3, 8);
        put(ctx, abi::kCtrlreg64 + 4 * 8, 0x6f0, 8);
    } else {
        const size_t r = abi::kUserRegs32;
        using namespace abi::regs32;
        put(ctx, r + eax, reg(0), 4);
        put(ctx, r + ebx, reg(1), 4);
        put(ctx, r + ecx, reg(2), 4);
        put(ctx, r + edx, reg(3), 4);
        put(ctx, r + esi, reg(4), 4);
        put(ctx, r + edi, reg(5), 4);
        put(ctx, r + ebp, sp_value + 0x80, 4);
        put(ctx, r + eip, ip_value, 4);
        put(ctx, r + cs, abi::kFlatKernelCs32, 2);
        put(ctx, r + eflags, 0x246, 4);
        put(ctx, r + esp, sp_value, 4);
        put(ctx, r + ss, abi::kFlatKernelSs32, 2);
        put(ctx, abi::kKernelSs32, abi::kFlatKernelSs32, 4);
        put(ctx, abi::kKernelSs32 + 4, sp_value, 4);
        put(ctx, abi::kCtrlreg32 + 0 * 4, 0x80050033, 4);
        put(ctx, abi::kCtrlreg32 + 3 * 4, cr3, 4);
        put(ctx, abi::kCtrlreg32 + 4 * 4, 0x6f0, 4);
    }
    return ctx;
}

}  // namespace xendump::sim
