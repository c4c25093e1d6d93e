// Xen's XEN_ELFNOTE_CRASH_INFO (xen/include/public/elfnote.h), which both
// encoders write for a 64-bit PV guest so that crash and makedumpfile can
// translate through the guest's own p2m: the v1 writer in makedumpfile's
// eight-word form (writer/elf_headers.cpp), the compact writer in crash's
// three-word form (kdump/note_area.cpp). Both end with the frame-list list.
#pragma once

#include <cstdint>
#include <optional>

#include "xendump/dump_spec.hpp"

namespace xendump::elfcore {

// The note's type, under the name "Xen".
inline constexpr uint32_t kXenElfnoteCrashInfo = 0x1000001;

// A 64-bit PV guest's shared_info.arch.pfn_to_mfn_frame_list_list; nullopt
// for HVM, PVH and 32-bit PV guests, without shared_info, or when the guest
// published none (0) or only a linear p2m (~0).
std::optional<uint64_t> p2m_frame_list_list(const DumpSpec& spec);

}  // namespace xendump::elfcore
