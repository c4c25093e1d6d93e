// NT_PRSTATUS (xen-dump-core(5) "Notes" note 8) from a Xen x86_64 vcpu context: the registers
// crash, gdb and drgn read from a Linux kdump vmcore, one note per vcpu.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "xendump/dump_spec.hpp"
#include "xendump/format.hpp"

namespace xendump::kernel {

// Xen public/arch-x86/xen.h `struct vcpu_guest_context` for a 64-bit guest
// (xen-x86_64.h `struct cpu_user_regs`): 5168 bytes. Only the fields used
// here are named; offsets checked against the installed Xen headers.
struct XenVcpuContextX86_64 {
    static constexpr size_t kSize = 5168;
    static constexpr size_t kFlags = 512;       // after fpu_ctxt[512]
    static constexpr size_t kUserRegs = 520;    // struct cpu_user_regs, 200 bytes
    static constexpr size_t kCtrlreg = 4984;    // ctrlreg[8]; cr3 at 5008
    static constexpr size_t kFsBase = 5144;
    static constexpr size_t kGsBaseKernel = 5152;
    static constexpr size_t kGsBaseUser = 5160;
    static constexpr uint64_t kFlagInKernel = 1u << 2;  // VGCF_in_kernel

    // cpu_user_regs, in order (u64 each unless noted).
    uint64_t r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi;
    uint32_t error_code, entry_vector;
    uint64_t rip;
    uint16_t cs;
    uint8_t saved_upcall_mask;
    uint64_t rflags, rsp;
    uint16_t ss, es, ds, fs, gs;
    uint64_t flags;
    std::array<uint64_t, 8> ctrlreg;
    uint64_t fs_base, gs_base_kernel, gs_base_user;

    // Decodes the native 5168-byte context; Error if it is shorter.
    static XenVcpuContextX86_64 decode(std::span<const std::byte> bytes);
};

// Linux include/uapi/linux/elf.h `struct elf_prstatus` on x86_64 (the layout
// of kdump's crash notes): 336 bytes, pr_reg is `struct user_regs_struct`
// (arch/x86/include/asm/user_64.h), 27 u64.
struct ElfPrstatusX86_64 {
    int32_t si_signo, si_code, si_errno;  // pr_info
    int16_t pr_cursig;
    uint16_t pad0;
    uint64_t pr_sigpend, pr_sighold;
    int32_t pr_pid, pr_ppid, pr_pgrp, pr_sid;
    struct Timeval { int64_t tv_sec, tv_usec; };
    Timeval pr_utime, pr_stime, pr_cutime, pr_cstime;
    struct Regs {
        uint64_t r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip,
            cs, flags, sp, ss, fs_base, gs_base, ds, es, fs, gs;
    } pr_reg;
    int32_t pr_fpvalid;
    int32_t pad1;
};
static_assert(sizeof(ElfPrstatusX86_64) == 336);
static_assert(sizeof(ElfPrstatusX86_64::Regs) == 27 * 8);
static_assert(offsetof(ElfPrstatusX86_64, pr_pid) == 32);
static_assert(offsetof(ElfPrstatusX86_64, pr_reg) == 112);
static_assert(offsetof(ElfPrstatusX86_64, pr_fpvalid) == 328);

// Builds the prstatus of one vcpu. Choices (documented for readers of dumps):
//  - pr_pid = vcpu id + 1 (unique and non-zero, as QEMU's dump-guest-memory
//    does; Linux kdump would write the running task's pid, unknown here);
//  - orig_ax = ~0 (no system call: the vcpu context does not say);
//  - gs_base is the base active in the vcpu's current mode: gs_base_kernel in
//    kernel mode (PV: VGCF_in_kernel; HVM/PVH: cs in ring 0, as Xen's
//    arch_get_info_guest decides), else gs_base_user;
//  - pr_fpvalid = 0 (no NT_PRFPREG note is written).
ElfPrstatusX86_64 prstatus_from_context(uint32_t vcpu_id, const XenVcpuContextX86_64& ctx,
                                        format::GuestType type);

// The note descriptor bytes (336) for DumpSpec::prstatus.
std::vector<std::byte> prstatus_bytes(const ElfPrstatusX86_64& prstatus);

// One descriptor per vcpu of a 64-bit guest, in the order of `vcpus`
// (DumpSpec::prstatus). Error for a context shorter than 5168 bytes.
std::vector<std::vector<std::byte>> prstatus_notes(std::span<const VcpuContext> vcpus,
                                                   format::GuestType type);

}  // namespace xendump::kernel
