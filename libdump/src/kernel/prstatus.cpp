// Xen x86_64 vcpu_guest_context -> Linux x86_64 elf_prstatus (xen-dump-core(5) "Notes" note 8).
#include "xendump/kernel/prstatus.hpp"

#include <cstring>
#include <string>

#include "xendump/error.hpp"

namespace xendump::kernel {
namespace {

template <class T>
T load(std::span<const std::byte> bytes, size_t offset) {
    T v;
    std::memcpy(&v, bytes.data() + offset, sizeof v);
    return v;
}

}  // namespace

XenVcpuContextX86_64 XenVcpuContextX86_64::decode(std::span<const std::byte> b) {
    if (b.size() < kSize)
        throw Error("vcpu context is " + std::to_string(b.size()) + " bytes, a 64-bit one is " +
                    std::to_string(kSize));
    XenVcpuContextX86_64 c{};
    // cpu_user_regs (xen-x86_64.h): 15 general registers, then
    // error_code/entry_vector (u32 each), rip, cs(+pad, saved_upcall_mask),
    // rflags, rsp, and ss/es/ds/fs/gs each in an 8-byte slot.
    uint64_t* gprs[] = {&c.r15, &c.r14, &c.r13, &c.r12, &c.rbp, &c.rbx, &c.r11, &c.r10,
                        &c.r9,  &c.r8,  &c.rax, &c.rcx, &c.rdx, &c.rsi, &c.rdi};
    size_t off = kUserRegs;
    for (uint64_t* r : gprs) {
        *r = load<uint64_t>(b, off);
        off += 8;
    }
    c.error_code = load<uint32_t>(b, kUserRegs + 120);
    c.entry_vector = load<uint32_t>(b, kUserRegs + 124);
    c.rip = load<uint64_t>(b, kUserRegs + 128);
    c.cs = load<uint16_t>(b, kUserRegs + 136);
    c.saved_upcall_mask = load<uint8_t>(b, kUserRegs + 140);
    c.rflags = load<uint64_t>(b, kUserRegs + 144);
    c.rsp = load<uint64_t>(b, kUserRegs + 152);
    c.ss = load<uint16_t>(b, kUserRegs + 160);
    c.es = load<uint16_t>(b, kUserRegs + 168);
    c.ds = load<uint16_t>(b, kUserRegs + 176);
    c.fs = load<uint16_t>(b, kUserRegs + 184);
    c.gs = load<uint16_t>(b, kUserRegs + 192);
    c.flags = load<uint64_t>(b, kFlags);
    for (size_t i = 0; i < c.ctrlreg.size(); ++i) c.ctrlreg[i] = load<uint64_t>(b, kCtrlreg + 8 * i);
    c.fs_base = load<uint64_t>(b, kFsBase);
    c.gs_base_kernel = load<uint64_t>(b, kGsBaseKernel);
    c.gs_base_user = load<uint64_t>(b, kGsBaseUser);
    return c;
}

ElfPrstatusX86_64 prstatus_from_context(uint32_t vcpu_id, const XenVcpuContextX86_64& c,
                                        format::GuestType type) {
    ElfPrstatusX86_64 p{};
    p.pr_pid = static_cast<int32_t>(vcpu_id + 1);
    const bool in_kernel = type == format::GuestType::pv ? (c.flags & c.kFlagInKernel) != 0
                                                         : (c.cs & 3) == 0;
    auto& r = p.pr_reg;
    r.r15 = c.r15; r.r14 = c.r14; r.r13 = c.r13; r.r12 = c.r12;
    r.bp = c.rbp;  r.bx = c.rbx;  r.r11 = c.r11; r.r10 = c.r10;
    r.r9 = c.r9;   r.r8 = c.r8;   r.ax = c.rax;  r.cx = c.rcx;
    r.dx = c.rdx;  r.si = c.rsi;  r.di = c.rdi;
    r.orig_ax = ~uint64_t{0};
    r.ip = c.rip;
    r.cs = c.cs;
    r.flags = c.rflags;
    r.sp = c.rsp;
    r.ss = c.ss;
    r.fs_base = c.fs_base;
    r.gs_base = in_kernel ? c.gs_base_kernel : c.gs_base_user;
    r.ds = c.ds; r.es = c.es; r.fs = c.fs; r.gs = c.gs;
    return p;
}

std::vector<std::byte> prstatus_bytes(const ElfPrstatusX86_64& p) {
    std::vector<std::byte> out(sizeof p);
    std::memcpy(out.data(), &p, sizeof p);  // padding members are zero-initialised fields
    return out;
}

std::vector<std::vector<std::byte>> prstatus_notes(std::span<const VcpuContext> vcpus,
                                                   format::GuestType type) {
    std::vector<std::vector<std::byte>> out;
    out.reserve(vcpus.size());
    for (const auto& v : vcpus) {
        XenVcpuContextX86_64 c;
        try {
            c = XenVcpuContextX86_64::decode(v.bytes);
        } catch (const Error& e) {
            throw Error(e.message(), "vcpu " + std::to_string(v.id));
        }
        out.push_back(prstatus_bytes(prstatus_from_context(v.id, c, type)));
    }
    return out;
}

}  // namespace xendump::kernel
