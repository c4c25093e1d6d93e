#include "legacy/p2m_tree_search.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "legacy/hex.hpp"
#include "two_halves.hpp"

namespace xendump::legacy {
namespace {

using util::kPage;
// More candidate roots than this means the shape does not discriminate
// (e.g. a guest full of MFN lists); stop rather than spend minutes.
constexpr size_t kMaxRootsTried = 64;

// Slots read per pread when every page is classified in slot order (the
// slots follow each other in the file): 1 MiB, not one syscall per page.
constexpr uint64_t kSlotsPerRead = 256;

class PageEntries {
public:
    PageEntries(const ByteSource& src, const XcCoreFile& f) : src_(src), f_(f) {}
    // Loads the page of `slot` and decodes its guest-width entries (~0
    // widened). A sequential scan reads `ahead` slots at a time. The span
    // lives until the next load.
    std::span<const uint64_t> load(uint64_t slot, uint64_t ahead = 1) {
        constexpr size_t kWords = kPage / 8;
        if (slot < first_ || slot >= first_ + loaded_) {
            loaded_ = std::min<uint64_t>(ahead, f_.index.size() - slot);
            raw_.resize(loaded_ * kWords);
            src_.read(f_.page_offset(slot), std::as_writable_bytes(std::span(raw_)), "page");
            first_ = slot;
        }
        const uint64_t* page = raw_.data() + (slot - first_) * kWords;
        if (f_.guest_width == 8) return {page, kWords};  // read in place: no copy
        entries_.resize(kPage / 4);
        for (size_t i = 0; i < entries_.size(); ++i) {
            uint32_t e;
            std::memcpy(&e, reinterpret_cast<const std::byte*>(page) + i * 4, 4);
            entries_[i] = e == 0xFFFFFFFFu ? kInvalidEntry : e;
        }
        return entries_;
    }

private:
    const ByteSource& src_;
    const XcCoreFile& f_;
    std::vector<uint64_t> raw_;  // whole pages, read as bytes
    uint64_t first_ = 0, loaded_ = 0;
    std::vector<uint64_t> entries_;
};

// Shape of one page: a p2m leaf (dumped MFNs or ~0, at least one MFN), an
// empty leaf (nothing but ~0: a ballooned-out range of xenolinux's p2m array,
// or pvops' p2m_missing page that every missing leaf shares) and/or an MFN
// list (k >= 1 dumped MFNs, then only 0 or ~0).
struct Shape {
    bool leaf = false;
    bool empty_leaf = false;
    uint32_t list_len = 0;
    bool any_leaf() const { return leaf || empty_leaf; }
};

Shape classify(std::span<const uint64_t> e, const MfnSlots& slots) {
    Shape s;
    size_t i = 0;
    while (i < e.size() && e[i] != 0 && e[i] != kInvalidEntry && slots.contains(e[i])) ++i;
    size_t prefix = i;
    bool leaf = true, tail_empty = true;
    uint64_t mfns = prefix;
    for (; i < e.size(); ++i) {
        if (e[i] == kInvalidEntry) continue;
        if (e[i] == 0) {
            leaf = false;
            continue;
        }
        tail_empty = false;
        if (slots.contains(e[i]))
            ++mfns;
        else {
            leaf = false;
            break;
        }
    }
    s.leaf = leaf && mfns > 0;
    s.empty_leaf = leaf && mfns == 0;  // nothing but ~0
    s.list_len = (prefix > 0 && tail_empty) ? static_cast<uint32_t>(prefix) : 0;
    return s;
}

// Every page's shape, in slot order. The scan reads the whole file (a 4 GiB
// dump: 4 GiB out of the page cache), so two threads take half each.
std::vector<Shape> classify_all(const ByteSource& src, const XcCoreFile& f, const MfnSlots& slots) {
    const std::vector<uint64_t>& index = f.index;
    std::vector<Shape> shape(index.size());
    in_two_halves(index.size(), index.size() >= 16 * kSlotsPerRead, [&](uint64_t from, uint64_t to, bool) {
        PageEntries pages(src, f);
        for (uint64_t slot = from; slot < to; ++slot)
            if (index[slot] != kInvalidEntry)  // reads ahead within this half only
                shape[slot] = classify(pages.load(slot, std::min<uint64_t>(kSlotsPerRead, to - slot)), slots);
    });
    return shape;
}

}  // namespace

TreeSearchResult find_p2m_tree(const ByteSource& src, const XcCoreFile& f, const MfnSlots& slots) {
    TreeSearchResult result;
    const std::vector<uint64_t>& index = f.index;
    const std::vector<Shape> shape = classify_all(src, f, slots);
    PageEntries pages(src, f);

    auto shape_of = [&](uint64_t mfn) -> const Shape* {
        const auto slot = slots.slot_of(mfn);
        return slot ? &shape[*slot] : nullptr;
    };

    size_t per_page = kPage / f.guest_width;
    size_t roots_tried = 0, consistent = 0;
    std::string first_conflict;
    for (uint64_t root = 0; root < index.size() && roots_tried < kMaxRootsTried; ++root) {
        if (shape[root].list_len == 0) continue;
        const auto root_entries = pages.load(root);
        std::vector<uint64_t> middles(root_entries.begin(), root_entries.begin() + shape[root].list_len);
        // Every middle must be a list of leaves: check shapes before reading.
        bool fits = true;
        for (uint64_t m : middles) {
            const Shape* s = shape_of(m);
            if (!s || s->list_len == 0) {
                fits = false;
                break;
            }
        }
        if (!fits) continue;
        std::vector<uint64_t> leaves;
        for (uint64_t m : middles) {
            const auto e = pages.load(*slots.slot_of(m));
            for (size_t i = 0; i < shape_of(m)->list_len && fits; ++i) {
                const Shape* s = shape_of(e[i]);
                // An empty leaf names no frame, but its place in the tree
                // still counts: the pfns it covers must have no page.
                if (!s || !s->any_leaf()) fits = false;
                leaves.push_back(e[i]);
            }
            if (!fits) break;
        }
        if (!fits) continue;
        ++roots_tried;
        PfnCollector collect(index, slots);
        bool ok = true;
        for (size_t l = 0; l < leaves.size() && ok; ++l) {
            // An empty leaf adds nothing: pvops' tree may name its one
            // missing leaf hundreds of thousands of times.
            if (shape_of(leaves[l])->empty_leaf) continue;
            const auto e = pages.load(*slots.slot_of(leaves[l]));  // every leaf was found above
            for (size_t i = 0; i < per_page && ok; ++i)
                if (e[i] != kInvalidEntry) ok = collect.add(l * per_page + i, e[i]);
        }
        if (!ok || !collect.complete()) {
            if (first_conflict.empty())
                first_conflict = "candidate root mfn " + hex(index[root]) + ": " +
                                 (ok ? "maps " + std::to_string(collect.found()) + " of " +
                                           std::to_string(collect.expected()) + " dumped mfns"
                                     : collect.conflict());
            continue;
        }
        ++consistent;
        auto mapping = collect.take();
        if (result.recovery && result.recovery->pfn_of_slot != mapping) {
            result.recovery.reset();
            result.detail = "two p2m trees (root mfns " + hex(index[root]) +
                            " and another) give different mappings: ambiguous";
            return result;
        }
        if (!result.recovery)
            result.recovery = PfnRecovery{std::move(mapping), "p2m-tree:root-mfn=" + hex(index[root])};
    }
    if (!result.recovery)
        result.detail = "shape search over " + std::to_string(index.size()) + " pages found " +
                        std::to_string(roots_tried) + " candidate p2m tree root(s), none consistent" +
                        (first_conflict.empty() ? "" : " (" + first_conflict + ")");
    return result;
}

}  // namespace xendump::legacy
