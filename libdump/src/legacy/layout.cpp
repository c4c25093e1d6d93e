#include "legacy/layout.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "legacy/guest_walk.hpp"
#include "legacy/hex.hpp"
#include "legacy/p2m_tree_search.hpp"
#include "legacy/pfn_map.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {
namespace {

constexpr size_t kFlagsAt = 512;  // vcpu_guest_context: fpu_ctxt[512], then flags
constexpr uint64_t kVgcfHvmGuest = 1u << 1;
// Xen 3.0.3 HVM dumps skipped the MMIO hole below 4 GiB: slot i >= 0xF0000
// holds pfn i + 0x10000 (spec §A.2).
constexpr uint64_t kHvmHoleStart = 0xF0000;
constexpr uint64_t kHvmHoleSize = 0x10000;

uint64_t hvm_slot_pfn(uint64_t slot) { return slot < kHvmHoleStart ? slot : slot + kHvmHoleSize; }

// Slots in pfn order when the pfns are unique and dense (at most 4 pfns of
// range per page, the usual case): each slot goes straight to its pfn's
// place, where sorting a million slots by an indirect key costs a cache miss
// per comparison. Empty when they are not: the caller sorts.
std::vector<uint64_t> slots_placed_by_pfn(const std::vector<uint64_t>& pfn_of_slot, uint64_t count, uint64_t top) {
    std::vector<uint64_t> order;
    if (count == 0 || top / 4 >= count) return order;
    std::vector<uint64_t> slot_at(top + 1, kInvalidEntry);
    for (uint64_t s = 0; s < pfn_of_slot.size(); ++s) {
        const uint64_t pfn = pfn_of_slot[s];
        if (pfn == kInvalidEntry) continue;
        if (slot_at[pfn] != kInvalidEntry) return order;  // a pfn twice
        slot_at[pfn] = s;
    }
    order.reserve(count);
    for (uint64_t s : slot_at)
        if (s != kInvalidEntry) order.push_back(s);
    return order;
}

// Builds the sorted entries from pfn-of-slot (kInvalidEntry = no page).
LegacyLayout from_pfns(format::GuestType type, const std::vector<uint64_t>& pfn_of_slot,
                       const std::vector<uint64_t>& gmfn_of_slot) {
    LegacyLayout l;
    l.type = type;
    uint64_t count = 0, top = 0;
    for (uint64_t pfn : pfn_of_slot)
        if (pfn != kInvalidEntry) {
            ++count;
            top = std::max(top, pfn);
        }
    std::vector<uint64_t> order = slots_placed_by_pfn(pfn_of_slot, count, top);
    if (order.size() != count) {
        order.clear();
        for (uint64_t s = 0; s < pfn_of_slot.size(); ++s)
            if (pfn_of_slot[s] != kInvalidEntry) order.push_back(s);
        std::sort(order.begin(), order.end(),
                  [&](uint64_t a, uint64_t b) { return pfn_of_slot[a] < pfn_of_slot[b]; });
    }
    l.entries.reserve(count);
    l.slots.reserve(count);
    for (uint64_t s : order) {
        l.entries.push_back({pfn_of_slot[s], gmfn_of_slot[s]});
        l.slots.push_back(s);
    }
    return l;
}

// Slot i is pfn i (or the HVM rule), holes of ~0 dropped.
LegacyLayout slot_order(const XcCoreFile& f, format::GuestType type, bool hvm_hole) {
    uint64_t n = f.nr_pages();
    std::vector<uint64_t> pfn(n), gmfn(n);
    for (uint64_t s = 0; s < n; ++s) {
        bool hole = !f.index.empty() && f.index[s] == kInvalidEntry;
        pfn[s] = hole ? kInvalidEntry : (hvm_hole ? hvm_slot_pfn(s) : s);
        gmfn[s] = (type == format::GuestType::pv && !f.index.empty()) ? f.index[s] : pfn[s];
    }
    return from_pfns(type, pfn, gmfn);
}

bool in_slot_order(const std::vector<uint64_t>& pfn_of_slot) {
    for (uint64_t s = 0; s < pfn_of_slot.size(); ++s)
        if (pfn_of_slot[s] != kInvalidEntry && pfn_of_slot[s] != s) return false;
    return true;
}

Error refuse(const ByteSource& src, const std::string& what, const std::string& tried, const std::string& help) {
    return Error(what + ". Tried: " + tried + ". " + help, src.name());
}

}  // namespace

bool context_says_hvm(const XcCoreFile& f) {
    if (f.contexts.empty()) return false;
    uint64_t flags = 0;
    std::memcpy(&flags, f.contexts[0].data() + kFlagsAt, f.guest_width);
    return (flags & kVgcfHvmGuest) != 0;
}

LegacyLayout decide_layout(const ByteSource& src, const XcCoreFile& f, const LayoutOptions& opt) {
    const std::string inferred_help =
        "--allow-inferred-layout writes slot order as pfn order and records LAYOUT=...;decided-by=inferred";

    if (f.damage == Damage::ocaml_swapped_no_index) {
        if (!opt.allow_inferred)
            throw refuse(src,
                         "damaged file from Xen's OCaml writer: xch_ctxt_offset and xch_index_offset are swapped "
                         "and there is no index, so no page's frame number is known",
                         "header offsets (contexts found at 0x18)", inferred_help);
        auto type = f.is_hvm_magic() ? format::GuestType::hvm : format::GuestType::pv;
        LegacyLayout l = slot_order(f, type, false);
        l.layout = "ocaml-no-index;decided-by=inferred:slot-order";
        l.inferred = true;
        return l;
    }

    MfnSlots slots;
    if (auto dup = build_mfn_slots(f.index, slots)) {
        uint64_t at = uint64_t{f.header.index_offset} + dup->second_slot * f.entry_size;
        throw Error("index is not a permutation of frames: entry " + std::to_string(dup->second_slot) + " repeats " +
                        hex(dup->mfn) + " of entry " + std::to_string(dup->first_slot),
                    src.name(), at);
    }
    bool has_holes = slots.size() != f.index.size();

    if (f.is_hvm_magic()) {
        // Xen 3.0.4 HVM: MFNs in the hypervisor's allocation order and no
        // guest p2m exists; nothing in the file gives the pfns (spec §A.3).
        if (!opt.allow_inferred)
            throw refuse(src,
                         "HVM page-list dump (magic 0xf00febee, Xen 3.0.4): the index holds machine frames in "
                         "allocation order and an HVM guest keeps no p2m, so pfns cannot be established",
                         "magic", inferred_help + " (allocation order usually follows pfn order)");
        LegacyLayout l = slot_order(f, format::GuestType::hvm, f.nr_pages() > kHvmHoleStart);
        for (auto& e : l.entries) e.gmfn = e.pfn;
        l.layout = "hvm-page-list;decided-by=inferred:slot-order";
        l.inferred = true;
        return l;
    }

    std::vector<std::string> tried;
    std::vector<uint64_t> gmfn_of_slot = f.index;
    auto accept = [&](PfnRecovery rec) {
        LegacyLayout l = from_pfns(format::GuestType::pv, rec.pfn_of_slot, gmfn_of_slot);
        l.layout = std::string(in_slot_order(rec.pfn_of_slot) ? "pv-pfn-order" : "pv-page-list") +
                   ";decided-by=" + rec.how;
        return l;
    };

    if (!slots.empty()) {
        TreeSearchResult tree = find_p2m_tree(src, f, slots);
        if (tree.recovery) return accept(std::move(*tree.recovery));
        tried.push_back(tree.detail);
        if (opt.system_map) {
            uint64_t va = system_map_symbol(*opt.system_map, "phys_to_machine_mapping");
            WalkResult walk = recover_pfns_by_symbol(src, f, slots, va);
            if (walk.recovery) return accept(std::move(*walk.recovery));
            tried.push_back("System.map " + *opt.system_map + ": " + walk.detail);
        } else {
            tried.push_back("no --system-map given");
        }
    }

    // No guest p2m. Xen 3.0.3 wrote HVM guests in pfn order under the PV
    // magic; their vcpu context carries VGCF_HVM_GUEST (spec §A.2).
    if (context_says_hvm(f)) {
        LegacyLayout l = slot_order(f, format::GuestType::hvm, true);
        l.layout = "hvm-pfn-order;decided-by=vcpu0-hvm-flag";
        return l;
    }
    // Holes (~0) cannot occur in a page list: the index is in pfn order
    // (vendor pfn-ordered PV, spec §A.4), slot i is pfn i and holds index[i].
    if (has_holes) {
        LegacyLayout l = slot_order(f, format::GuestType::pv, false);
        l.layout = "pv-pfn-order;decided-by=index-holes";
        return l;
    }
    std::string tried_text;
    for (const auto& t : tried) tried_text += (tried_text.empty() ? "" : "; ") + t;
    if (!opt.allow_inferred)
        throw refuse(src,
                     "PV page-list dump: the pfn of each page could not be established from the guest's p2m",
                     tried_text,
                     "Pass --system-map FILE (the guest kernel's System.map) to walk its page tables, or " +
                         inferred_help);
    LegacyLayout l = slot_order(f, format::GuestType::pv, false);
    l.layout = "pv-page-list;decided-by=inferred:slot-order";
    l.inferred = true;
    return l;
}

}  // namespace xendump::legacy
