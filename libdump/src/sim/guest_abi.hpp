// Layout facts of Xen's x86 guest ABI that the simulated host reproduces,
// taken from xen/include/public/arch-x86/xen.h, xen-x86_64.h, xen-x86_32.h
// (struct shared_info, struct arch_shared_info, struct vcpu_guest_context,
// struct cpu_user_regs) and checked against offsetof() on the Debian
// libxen-dev headers (xen/foreign/x86_64.h, x86_32.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace xendump::sim::abi {

// shared_info.arch: max_pfn, pfn_to_mfn_frame_list_list, nmi_reason,
// p2m_cr3, p2m_vaddr, p2m_generation, each an unsigned long of the guest.
inline constexpr size_t kSharedInfoArch64 = 3088;
inline constexpr size_t kSharedInfoArch32 = 2316;
enum ArchSharedField : unsigned {
    kMaxPfn = 0, kFrameListList = 1, kNmiReason = 2, kP2mCr3 = 3, kP2mVaddr = 4, kP2mGeneration = 5
};

// vcpu_guest_context: fpu_ctxt[512], flags, user_regs, ..., ctrlreg[8].
inline constexpr size_t kVcpuContextSize64 = 5168;
inline constexpr size_t kVcpuContextSize32 = 2800;
inline constexpr size_t kVcpuFlags = 512;
inline constexpr size_t kUserRegs64 = 520;
inline constexpr size_t kUserRegs32 = 516;
inline constexpr size_t kCtrlreg64 = 4984;  // ctrlreg[3] at 5008
inline constexpr size_t kCtrlreg32 = 2716;  // ctrlreg[3] at 2728
inline constexpr size_t kKernelSs64 = 4968;
inline constexpr size_t kKernelSs32 = 2708;
inline constexpr uint64_t kVgcfInKernel = 1u << 2;
inline constexpr uint64_t kVgcfOnline = 1u << 5;

// struct cpu_user_regs offsets (x86_64 / x86_32).
namespace regs64 {
inline constexpr size_t rbp = 32, rbx = 40, rax = 80, rcx = 88, rdx = 96, rsi = 104, rdi = 112,
                        rip = 128, cs = 136, rflags = 144, rsp = 152, ss = 160;
}
namespace regs32 {
inline constexpr size_t ebx = 0, ecx = 4, edx = 8, esi = 12, edi = 16, ebp = 20, eax = 24,
                        eip = 32, cs = 36, eflags = 40, esp = 44, ss = 48;
}
// FLAT_KERNEL_CS/SS of xen-x86_64.h and xen-x86_32.h (ring 3 / ring 1 kernels).
inline constexpr uint16_t kFlatKernelCs64 = 0xe033, kFlatKernelSs64 = 0xe02b;
inline constexpr uint16_t kFlatKernelCs32 = 0xe019, kFlatKernelSs32 = 0xe021;

// Page-table entry bits (x86): present, writable, accessed, dirty.
inline constexpr uint64_t kPtePresent = 0x1;
inline constexpr uint64_t kPteTable = 0x63;  // P | RW | A | D
inline constexpr uint64_t kPteAddrMask = 0x000ffffffffff000ULL;

// cr3 of a PV guest (xen_pfn_to_cr3): 64-bit mfn << 12; 32-bit PAE guests
// fold the high bits of the mfn into the low 12 bits.
inline constexpr uint64_t mfn_to_cr3(uint64_t mfn, unsigned width) {
    if (width == 8) return mfn << 12;
    return static_cast<uint32_t>((mfn << 12) | (mfn >> 20));
}
inline constexpr uint64_t cr3_to_mfn(uint64_t cr3, unsigned width) {
    if (width == 8) return cr3 >> 12;
    return static_cast<uint32_t>((cr3 >> 12) | (cr3 << 20));
}

// Where the simulator maps a linear p2m list (p2m_vaddr): a 64-bit guest in
// the vmalloc area of Linux x86_64 (canonical, 512 GiB aligned so the tables
// start at entry 0 of each level); a 32-bit PAE guest high in its kernel half
// (2 MiB aligned; the list must end below 4 GiB).
inline constexpr uint64_t kLinearP2mVaddr64 = 0xffffc90000000000ULL;
inline constexpr uint64_t kLinearP2mVaddr32 = 0xf0000000ULL;

}  // namespace xendump::sim::abi
