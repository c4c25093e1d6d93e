// Finding a PV guest's p2m frame-list tree among the pages of a page-list
// dump by its shape (doc/legacy-formats.md 1.1), the way memory analysers
// find kernel tables: a root page whose entries are MFNs of dumped pages,
// whose entries are MFNs of dumped pages ("frame lists"), whose entries are
// the guest's MFNs or ~0 (the p2m array itself). A leaf of nothing but ~0 is
// a leaf too: a ballooned-out range of xenolinux's array, or pvops' one
// p2m_missing page that every missing leaf names. This is Linux's
// pfn_to_mfn_frame_list_list -> pfn_to_mfn_frame_list[] -> phys_to_machine_mapping.
#pragma once

#include <optional>
#include <string>

#include "legacy/byte_source.hpp"
#include "legacy/pfn_map.hpp"
#include "legacy/xc_core.hpp"

namespace xendump::legacy {

struct TreeSearchResult {
    std::optional<PfnRecovery> recovery;  // set when exactly one consistent mapping was found
    std::string detail;                   // what was examined, for messages
};

// Memory: the pages with a shape (24 bytes each; in a real guest about one
// in 512, the p2m's own) and the chosen tree's leaves (8 bytes each).
TreeSearchResult find_p2m_tree(const ByteSource& src, const XcCoreFile& file, const MfnIndex& slots);

}  // namespace xendump::legacy
