#include "elfcore/crash_info.hpp"

#include "p2m/p2m_walk.hpp"

namespace xendump::elfcore {

std::optional<uint64_t> p2m_frame_list_list(const DumpSpec& spec) {
    // A 32-bit crash reads 32-bit words there: only 64-bit guests get the note.
    if (spec.type != format::GuestType::pv || spec.guest_width != 8 || !spec.shared_info) return std::nullopt;
    const auto arch = p2m_detail::parse_arch_shared_info(*spec.shared_info, spec.guest_width);
    // 0: none published; ~0: a linear p2m only (SIF_VIRT_P2M_4TOOLS), no frame-list list.
    if (arch.frame_list_list == 0 || arch.frame_list_list == p2m_detail::kNoFrame) return std::nullopt;
    return arch.frame_list_list;
}

}  // namespace xendump::elfcore
