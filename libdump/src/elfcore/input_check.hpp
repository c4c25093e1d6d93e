// What the v1 writer refuses before planning anything: a spec without vcpus
// or with contexts of the wrong size, a bad guest width or shared_info,
// pfns out of order or too large, more pages than one NT_XEN_P2M holds.
#pragma once

#include <span>

#include "xendump/dump_spec.hpp"
#include "xendump/page_source.hpp"

namespace xendump::elfcore {

// Throws Error naming the first problem.
void check_input(const DumpSpec& spec, std::span<const PageEntry> entries);

// The same in parts, for a list read a window at a time: the spec; each
// window (entries [first, first + window.size()), after the pfn `before` of
// entry first - 1 when first > 0); the count.
void check_spec(const DumpSpec& spec);
void check_entries(uint64_t first, std::span<const PageEntry> window, uint64_t before);
void check_entry_count(uint64_t n);

// check_input() on a list read a window at a time (nr_entries(), read_entries()).
void check_input(const DumpSpec& spec, const PageSource& source);

}  // namespace xendump::elfcore
