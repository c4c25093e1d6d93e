// What the v1 writer refuses before planning anything: a spec without vcpus
// or with contexts of the wrong size, a bad guest width or shared_info,
// pfns out of order or too large, more pages than one NT_XEN_P2M holds.
#pragma once

#include <span>

#include "xendump/dump_spec.hpp"
#include "xendump/page_source.hpp"

namespace xendump::writer {

// Throws Error naming the first problem.
void check_input(const DumpSpec& spec, std::span<const PageEntry> entries);

}  // namespace xendump::writer
