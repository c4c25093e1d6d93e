#include "legacy/layout.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "legacy/spill.hpp"

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
// holds pfn i + 0x10000 (doc/legacy-formats.md 1.2).
constexpr uint64_t kHvmHoleStart = 0xF0000;
constexpr uint64_t kHvmHoleSize = 0x10000;

uint64_t hvm_slot_pfn(uint64_t slot) { return slot < kHvmHoleStart ? slot : slot + kHvmHoleSize; }

LegacyLayout make_layout(format::GuestType type, std::shared_ptr<const PageTable> table) {
    LegacyLayout l;
    l.type = type;
    l.entries.table = l.slots.table = table;
    l.table = std::move(table);
    return l;
}

// Slot i is pfn i (or the HVM rule), holes of ~0 dropped: the index read a
// window at a time, the entries in runs.
LegacyLayout slot_order(const XcCoreFile& f, format::GuestType type, bool hvm_hole) {
    PageTable::Builder table;
    const bool pv = type == format::GuestType::pv;
    auto pfn_of = [&](uint64_t s) { return hvm_hole ? hvm_slot_pfn(s) : s; };
    if (f.index.empty()) {
        for (uint64_t s = 0; s < f.nr_pages(); ++s) table.add(pfn_of(s), pfn_of(s), s);
    } else {
        f.index.for_each([&](uint64_t s, uint64_t e) {
            if (e != kInvalidEntry) table.add(pfn_of(s), pv ? e : pfn_of(s), s);
        });
    }
    return make_layout(type, table.finish());
}

// The entries of a recovered page-list layout, in pfn order with their
// slots, out of core: the recovery's (pfn, mfn) pairs sorted by mfn, joined
// with the index sorted by mfn, sorted back by pfn. `in_slot_order` says
// whether every pfn is its slot.
LegacyLayout from_recovery(const PfnRecovery& rec, const MfnIndex& slots, bool& in_slot_order) {
    struct MfnPfn {
        uint64_t mfn, pfn;
    };
    struct Placed {
        uint64_t pfn, mfn, slot;
    };
    auto by_mfn = [](const MfnPfn& a, const MfnPfn& b) { return a.mfn < b.mfn; };
    auto by_pfn = [](const Placed& a, const Placed& b) { return a.pfn < b.pfn; };
    ExternalSorter<MfnPfn, decltype(by_mfn)> pairs(by_mfn);
    rec.walk([&](uint64_t pfn, uint64_t mfn) { pairs.push({mfn, pfn}); });
    ExternalSorter<Placed, decltype(by_pfn)> placed(by_pfn);
    auto index = slots.cursor();
    pairs.drain([&](const MfnPfn& p) {
        while (!index.done() && index.head().mfn < p.mfn) index.next();
        // The recovery was checked: every dumped mfn once.
        if (index.done() || index.head().mfn != p.mfn)
            throw Error("recovered mfn " + hex(p.mfn) + " (pfn " + hex(p.pfn) + ") is not in the index once");
        placed.push({p.pfn, p.mfn, index.head().slot});
        index.next();
    });
    PageTable::Builder table;
    in_slot_order = true;
    placed.drain([&](const Placed& p) {
        in_slot_order = in_slot_order && p.pfn == p.slot;
        table.add(p.pfn, p.mfn, p.slot);
    });
    return make_layout(format::GuestType::pv, table.finish());
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

    MfnIndex slots;
    if (auto dup = MfnIndex::build(f.index, slots)) {
        uint64_t at = f.index.offset_of(dup->second_slot);
        throw Error("index is not a permutation of frames: entry " + std::to_string(dup->second_slot) + " repeats " +
                        hex(dup->mfn) + " of entry " + std::to_string(dup->first_slot),
                    src.name(), at);
    }
    bool has_holes = slots.size() != f.index.size();

    if (f.is_hvm_magic()) {
        // Xen 3.0.4 HVM: MFNs in the hypervisor's allocation order and no
        // guest p2m exists; nothing in the file gives the pfns (doc/legacy-formats.md 1.3).
        if (!opt.allow_inferred)
            throw refuse(src,
                         "HVM page-list dump (magic 0xf00febee, Xen 3.0.4): the index holds machine frames in "
                         "allocation order and an HVM guest keeps no p2m, so pfns cannot be established",
                         "magic", inferred_help + " (allocation order usually follows pfn order)");
        LegacyLayout l = slot_order(f, format::GuestType::hvm, f.nr_pages() > kHvmHoleStart);  // gmfn = pfn
        l.layout = "hvm-page-list;decided-by=inferred:slot-order";
        l.inferred = true;
        return l;
    }

    std::vector<std::string> tried;
    auto accept = [&](const PfnRecovery& rec) {
        bool in_slot_order = true;
        LegacyLayout l = from_recovery(rec, slots, in_slot_order);
        l.layout = std::string(in_slot_order ? "pv-pfn-order" : "pv-page-list") + ";decided-by=" + rec.how;
        return l;
    };

    if (!slots.empty()) {
        TreeSearchResult tree = find_p2m_tree(src, f, slots);
        if (tree.recovery) return accept(*tree.recovery);
        tried.push_back(tree.detail);
        if (opt.system_map) {
            uint64_t va = system_map_symbol(*opt.system_map, "phys_to_machine_mapping");
            WalkResult walk = recover_pfns_by_symbol(src, f, slots, va);
            if (walk.recovery) return accept(*walk.recovery);
            tried.push_back("System.map " + *opt.system_map + ": " + walk.detail);
        } else {
            tried.push_back("no --system-map given");
        }
    }

    // No guest p2m. Xen 3.0.3 wrote HVM guests in pfn order under the PV
    // magic; their vcpu context carries VGCF_HVM_GUEST (doc/legacy-formats.md 1.2).
    if (context_says_hvm(f)) {
        LegacyLayout l = slot_order(f, format::GuestType::hvm, true);
        l.layout = "hvm-pfn-order;decided-by=vcpu0-hvm-flag";
        return l;
    }
    // Holes (~0) cannot occur in a page list: the index is in pfn order
    // (vendor pfn-ordered PV, doc/legacy-formats.md 1.4), slot i is pfn i and holds index[i].
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
