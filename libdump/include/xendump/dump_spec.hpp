// Everything the writer needs besides the pages: the domain's identity and
// metadata, its vcpu contexts and optional guest-kernel notes.
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

    // Room for what is only found during the page pass (WriteOptions::after_pages):
    // at note 7's place a kNtXenPadding note big enough for a VMCOREINFO note of
    // kMaxVmcoreinfoText bytes (unless `vmcoreinfo` is already known), and NUL
    // bytes after the NT_XEN_DOMAIN text for kKernelKeysRoom bytes of more keys
    // (KERNEL=, KERNELOFFSET=). A seekable output gets them patched in place; a
    // pipe keeps the padding (see writer/late_notes.hpp). Sizes never depend on
    // what is found, so expected_file_size() stays exact.
    bool reserve_vmcoreinfo = false;
    static constexpr size_t kMaxVmcoreinfoText = 4096;  // Linux VMCOREINFO_BYTES (one page)
    static constexpr size_t kKernelKeysRoom = 128;      // "KERNEL=" + 64-byte release + KERNELOFFSET=

    uint64_t magic() const {
        return type == format::GuestType::pv ? format::kMagicPV : format::kMagicHVM;
    }
};

}  // namespace xendump
