#include "legacy/p2m_tree_search.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
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

Shape classify(std::span<const uint64_t> e, const MfnIndex& slots) {
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
            if (prefix == 0) break;  // neither a leaf nor a list: nothing more to learn
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

// A page with a shape: the only pages the tree search looks at again.
struct Candidate {
    uint64_t mfn, slot;
    Shape shape;
};

// Every page classified, in slot order; the pages with a shape kept (in a
// real guest the p2m's own pages, about one in 512, plus pages that look
// like them). The scan reads the whole file (a 4 GiB dump: 4 GiB out of the
// page cache), so two threads take half each.
std::vector<Candidate> classify_all(const ByteSource& src, const XcCoreFile& f, const MfnIndex& slots) {
    const IndexTable& index = f.index;
    std::vector<Candidate> halves[2];
    in_two_halves(index.size(), index.size() >= 16 * kSlotsPerRead, [&](uint64_t from, uint64_t to, bool second) {
        PageEntries pages(src, f);
        std::vector<Candidate>& out = halves[second ? 1 : 0];
        // Slots wholly inside a hole of the file are zero pages (no shape):
        // not read. Data: slots [data_from, data_to).
        uint64_t data_from = 0, data_to = 0;
        index.for_each(
            [&](uint64_t slot, uint64_t mfn) {
                if (mfn == kInvalidEntry) return;
                if (slot >= data_to) {
                    const auto d = src.data_from(f.page_offset(slot));
                    data_from = (d.start - f.pages_offset) / kPage;
                    data_to = (d.end - f.pages_offset + kPage - 1) / kPage;
                }
                if (slot < data_from) return;
                // Reads ahead within this half and this stretch of data only.
                const uint64_t ahead = std::clamp<uint64_t>(std::min(to, data_to) - slot, 1, kSlotsPerRead);
                const Shape s = classify(pages.load(slot, ahead), slots);
                if (s.any_leaf() || s.list_len) out.push_back({mfn, slot, s});
            },
            from, to);
    });
    halves[0].insert(halves[0].end(), halves[1].begin(), halves[1].end());
    return std::move(halves[0]);
}

}  // namespace

TreeSearchResult find_p2m_tree(const ByteSource& src, const XcCoreFile& f, const MfnIndex& slots) {
    TreeSearchResult result;
    const IndexTable& index = f.index;
    const std::vector<Candidate> cands = classify_all(src, f, slots);
    MfnSlots cand_of;  // mfn -> position in cands
    cand_of.reserve(cands.size());
    for (uint64_t i = 0; i < cands.size(); ++i) cand_of.insert(cands[i].mfn, i);
    PageEntries pages(src, f);

    auto cand = [&](uint64_t mfn) -> const Candidate* {
        const auto i = cand_of.slot_of(mfn);
        return i ? &cands[*i] : nullptr;
    };

    const size_t per_page = kPage / f.guest_width;
    size_t roots_tried = 0;
    std::string first_conflict;
    SparseBitmap seen = slots.frame_bitmap();
    std::pair<uint64_t, uint64_t> accepted_digest{};
    for (const Candidate& root : cands) {
        if (roots_tried >= kMaxRootsTried) break;
        if (root.shape.list_len == 0) continue;
        const auto root_entries = pages.load(root.slot);
        std::vector<uint64_t> middles(root_entries.begin(), root_entries.begin() + root.shape.list_len);
        // Every middle must be a list of leaves: check shapes before reading.
        bool fits = true;
        for (uint64_t m : middles) {
            const Candidate* c = cand(m);
            if (!c || c->shape.list_len == 0) {
                fits = false;
                break;
            }
        }
        if (!fits) continue;
        // Each leaf's slot, or ~0 for an empty leaf: it names no frame, but
        // its place in the tree still counts (the pfns it covers have no
        // page), and pvops' tree may name its one missing leaf hundreds of
        // thousands of times.
        std::vector<uint64_t> leaves;
        for (uint64_t m : middles) {
            const Candidate* mc = cand(m);
            const auto e = pages.load(mc->slot);
            for (size_t i = 0; i < mc->shape.list_len && fits; ++i) {
                const Candidate* c = cand(e[i]);
                if (!c || !c->shape.any_leaf()) fits = false;
                else leaves.push_back(c->shape.empty_leaf ? kInvalidEntry : c->slot);
            }
            if (!fits) break;
        }
        if (!fits) continue;
        ++roots_tried;
        // f(pfn, mfn) for every dumped mfn the tree maps, in pfn order, until f returns false.
        auto pairs = [&src, &f, &slots, per_page, leaves](auto&& fn) {
            PageEntries leaf_pages(src, f);
            for (size_t l = 0; l < leaves.size(); ++l) {
                if (leaves[l] == kInvalidEntry) continue;
                const auto e = leaf_pages.load(leaves[l]);
                for (size_t i = 0; i < per_page; ++i)
                    if (e[i] != kInvalidEntry && slots.contains(e[i]) && !fn(l * per_page + i, e[i])) return;
            }
        };
        auto walk = [pairs](const std::function<void(uint64_t, uint64_t)>& fn) {
            pairs([&](uint64_t pfn, uint64_t mfn) {
                fn(pfn, mfn);
                return true;
            });
        };
        PfnCheck check(slots, seen);
        bool ok = true;
        pairs([&](uint64_t pfn, uint64_t mfn) { return ok = check.add(pfn, mfn); });
        if (!ok || !check.complete()) {
            if (first_conflict.empty())
                first_conflict = "candidate root mfn " + hex(root.mfn) + ": " +
                                 (ok ? "maps " + std::to_string(check.found()) + " of " +
                                           std::to_string(check.expected()) + " dumped mfns"
                                     : conflict_text(walk, check.twice_mfn(), check.twice_pfn()));
            continue;
        }
        const auto digest = check.digest();
        if (result.recovery && digest != accepted_digest) {
            result.recovery.reset();
            result.detail = "two p2m trees (root mfns " + hex(root.mfn) +
                            " and another) give different mappings: ambiguous";
            return result;
        }
        if (!result.recovery) {
            result.recovery = PfnRecovery{walk, "p2m-tree:root-mfn=" + hex(root.mfn)};
            accepted_digest = digest;
        }
    }
    if (!result.recovery)
        result.detail = "shape search over " + std::to_string(index.size()) + " pages found " +
                        std::to_string(roots_tried) + " candidate p2m tree root(s), none consistent" +
                        (first_conflict.empty() ? "" : " (" + first_conflict + ")");
    return result;
}

}  // namespace xendump::legacy
