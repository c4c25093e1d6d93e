// Recovering pfns with the guest kernel's symbols (doc/legacy-formats.md
// 1.1, second way): `phys_to_machine_mapping` from System.map gives the
// virtual address of the pointer to the p2m array; vcpu 0's ctrlreg[3] gives
// the page tables, which in a PV guest hold machine frames, so a walk needs
// only the dump's MFN index.
#pragma once

#include <optional>
#include <string>

#include "legacy/byte_source.hpp"
#include "legacy/pfn_map.hpp"
#include "legacy/xc_core.hpp"

namespace xendump::legacy {

// Reads `symbol`'s address from a System.map ("ADDR TYPE NAME" lines).
// Throws Error when the file cannot be read or lacks the symbol.
uint64_t system_map_symbol(const std::string& system_map, const std::string& symbol);

struct WalkResult {
    std::optional<PfnRecovery> recovery;
    std::string detail;  // why it failed
};

WalkResult recover_pfns_by_symbol(const ByteSource& src, const XcCoreFile& file, const MfnIndex& slots,
                                  uint64_t p2m_pointer_vaddr);

}  // namespace xendump::legacy
