// Which pfn each page of a legacy xc_core file holds (doc/legacy-formats.md
// 1.1 to 1.4). There is no flag that says, so the decision is
// made from evidence and recorded in the output as LAYOUT=.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "legacy/byte_source.hpp"
#include "legacy/page_table.hpp"
#include "legacy/xc_core.hpp"
#include "xendump/format.hpp"
#include "xendump/page_source.hpp"

namespace xendump::legacy {

struct LayoutOptions {
    std::optional<std::string> system_map;  // guest kernel's System.map
    bool allow_inferred = false;            // write the best inference instead of refusing
};

// Read-only views of a layout's PageTable, by entry number.
struct LayoutEntries {
    std::shared_ptr<const PageTable> table;
    uint64_t size() const { return table ? table->size() : 0; }
    bool empty() const { return size() == 0; }
    PageEntry operator[](uint64_t i) const { return table->entry(i); }
};
struct LayoutSlots {
    std::shared_ptr<const PageTable> table;
    uint64_t size() const { return table ? table->size() : 0; }
    uint64_t operator[](uint64_t i) const { return table->slot(i); }
};

struct LegacyLayout {
    format::GuestType type = format::GuestType::pv;
    std::shared_ptr<const PageTable> table;  // ascending pfn, with each page's slot
    LayoutEntries entries;                   // entries[i]: {pfn, gmfn} (views of `table`)
    LayoutSlots slots;                       // slots[i]: file slot of entries[i]
    std::string layout;              // LAYOUT= value: "<variant>;decided-by=<evidence>"
    bool inferred = false;
};

// Decides the layout or throws Error saying what was tried and what would help.
LegacyLayout decide_layout(const ByteSource& src, const XcCoreFile& file, const LayoutOptions& options);

// The VGCF_HVM_GUEST flag (bit 1 of vcpu_guest_context.flags, right after the
// 512-byte FPU area) that Xen 3.0.x set in an HVM vcpu's context.
bool context_says_hvm(const XcCoreFile& file);

}  // namespace xendump::legacy
