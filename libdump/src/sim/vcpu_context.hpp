// Deterministic vcpu contexts for the simulated host, in the native layout
// xc_vcpu_getcontext() returns (struct vcpu_guest_context of the guest's
// width; HVM/PVH guests get the 64-bit one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace xendump::sim {

// `cr3` is the guest's top-level page table in cr3 form (0 when none exists).
std::vector<std::byte> build_vcpu_context(uint32_t domid, uint32_t vcpu, unsigned width, bool pv, uint64_t cr3);

// The instruction pointer the simulator gives a vcpu (tests recompute it).
uint64_t simulated_rip(uint32_t domid, uint32_t vcpu, unsigned width);

}  // namespace xendump::sim
