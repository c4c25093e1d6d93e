// Everything the writer needs besides the pages: the domain's identity and
// metadata, its vcpu contexts and optional guest-kernel notes (what is found
// in the pages comes from WriteOptions::guest_kernel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xendump/format.hpp"
#include "xendump/keyvalues.hpp"

namespace xendump {

struct VcpuContext {
    uint32_t id = 0;               // vcpu id (listed in VCPUS=)
    std::vector<std::byte> bytes;  // native vcpu_guest_context: 5168 (64-bit) or 2800 (32-bit PV)
};

struct DumpSpec {
    format::GuestType type = format::GuestType::pv;
    unsigned guest_width = 8;                 // 4 only for a 32-bit PV guest (EM_386)
    KeyValues domain;                         // NT_XEN_DOMAIN (the writer adds NR_PAGES, VCPUS)
    std::vector<VcpuContext> vcpus;           // at least one; refused otherwise
    format::XenVersionDesc xen_version{};     // note 3
    std::optional<std::vector<std::byte>> shared_info;  // 4096 bytes (PV), note 10
    std::optional<std::string> vmcoreinfo;   // note 7
    std::vector<std::vector<std::byte>> prstatus;  // note 8, one elf_prstatus per vcpu

    uint64_t magic() const {
        return type == format::GuestType::pv ? format::kMagicPV : format::kMagicHVM;
    }
};

}  // namespace xendump
