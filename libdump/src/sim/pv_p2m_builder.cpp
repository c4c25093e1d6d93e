// PV p2m in guest memory (see pv_p2m_builder.hpp). Two phases: first decide
// which structure pages exist and how they link (no mfns known yet), then
// place them on present pfns. The bytes of a page are made only when it is
// written out (PvP2mLayout::for_each_page): p2m entries from the extents and
// overrides, frame lists and first-level tables from the p2m pages they
// point at (implicit links), the few upper tables from explicit links.
#include "sim/pv_p2m_builder.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "sim/guest_abi.hpp"
#include "xendump/error.hpp"

namespace xendump::sim {

namespace {

constexpr size_t kNone = SIZE_MAX;

// One entry of an upper structure page (tree root, page tables above the
// first level) that points at another structure page.
struct Link {
    size_t parent;
    size_t offset;  // byte offset in the parent page
    size_t child;
    bool pte;       // page-table entry (mfn << 12 | flags) or a bare mfn at guest width
    uint64_t flags;
};

}  // namespace

class PvP2mPlan {
public:
    explicit PvP2mPlan(const DomainSpec& d)
        : d_(d), w_(d.guest_width), e_(kPageSize / d.guest_width),
          p_((d.p2m_size + e_ - 1) / e_), object_("domain " + std::to_string(d.domid)) {
        overrides_ = d_.p2m_overrides;
        // Stable: of two overrides of one pfn, the later still wins.
        std::stable_sort(overrides_.begin(), overrides_.end(), [](auto& a, auto& b) { return a.first < b.first; });
    }

    PvP2mLayout build() {
        plan_p2m_pages();
        bool tree = d_.p2m_format != P2mFormat::linear;
        bool linear = d_.p2m_format != P2mFormat::tree;
        size_t root = tree ? plan_tree() : kNone;
        size_t top = linear ? plan_linear() : kNone;
        place();
        std::stable_sort(links_.begin(), links_.end(), [](const Link& a, const Link& b) { return a.parent < b.parent; });

        PvP2mLayout out;
        out.entries_per_page = e_;
        for (uint64_t j = 0; j < p_; ++j) out.p2m_page_pfns.push_back(slots_[p2m_slot_[j]].pfn);
        const uint64_t invalid = w_ == 8 ? ~uint64_t{0} : 0xffffffffULL;
        out.max_pfn = d_.p2m_size;
        if (tree) out.frame_list_list_mfn = slots_[root].mfn;
        if (linear) out.top_table_mfn = slots_[top].mfn;
        out.pfn_to_mfn_frame_list_list = tree ? out.frame_list_list_mfn : invalid;
        out.p2m_cr3 = linear ? abi::mfn_to_cr3(out.top_table_mfn, w_) : 0;
        out.p2m_vaddr = linear ? vaddr_base() : 0;
        out.p2m_generation = 0;
        const auto& o = d_.shared_info_overrides;
        if (o.max_pfn) out.max_pfn = *o.max_pfn;
        if (o.pfn_to_mfn_frame_list_list) out.pfn_to_mfn_frame_list_list = *o.pfn_to_mfn_frame_list_list;
        if (o.p2m_cr3) out.p2m_cr3 = *o.p2m_cr3;
        if (o.p2m_vaddr) out.p2m_vaddr = *o.p2m_vaddr;
        if (o.p2m_generation) out.p2m_generation = *o.p2m_generation;
        // place() gave the slots ascending pfns in slot order.
        for (auto& s : slots_) out.structure_pfns.push_back(s.pfn);
        return out;
    }

    // Slot `i`'s bytes into page[0..4096).
    void make_page(size_t i, std::byte* page) const {
        const Slot& s = slots_[i];
        std::memset(page, static_cast<int>(s.fill), kPageSize);
        switch (s.kind) {
            case Kind::p2m: fill_p2m_entries(s.index, page); break;
            case Kind::frame_list:
                for (uint64_t j = s.index * e_; j < std::min(p_, (s.index + 1) * e_); ++j)
                    put(page, (j - s.index * e_) * w_, slots_[p2m_slot_[j]].mfn, w_);
                break;
            case Kind::missing_frame_list:
                for (uint64_t k = 0; k < e_; ++k) put(page, k * w_, slots_[missing_p2m_].mfn, w_);
                break;
            case Kind::l1_table:
                for (uint64_t j = s.index * 512; j < std::min(p_, (s.index + 1) * 512); ++j)
                    put(page, (j - s.index * 512) * 8, (slots_[p2m_slot_[j]].mfn << 12) | abi::kPteTable, 8);
                break;
            case Kind::missing_l1_table:
                for (uint64_t k = 0; k < 512; ++k)
                    put(page, k * 8, (slots_[missing_p2m_].mfn << 12) | abi::kPteTable, 8);
                break;
            case Kind::plain: break;
        }
        auto it = std::lower_bound(links_.begin(), links_.end(), i, [](const Link& l, size_t p) { return l.parent < p; });
        for (; it != links_.end() && it->parent == i; ++it) {
            const uint64_t mfn = slots_[it->child].mfn;
            if (it->pte) put(page, it->offset, (mfn << 12) | it->flags, 8);
            else put(page, it->offset, mfn, w_);
        }
    }

    size_t slot_count() const { return slots_.size(); }
    uint64_t slot_pfn(size_t i) const { return slots_[i].pfn; }

private:
    // What a slot's bytes are made of, besides its explicit links.
    enum class Kind : uint8_t { plain, p2m, frame_list, missing_frame_list, l1_table, missing_l1_table };
    struct Slot {
        uint64_t pfn = 0;
        uint64_t mfn = 0;
        uint64_t index = 0;  // p2m: page j; frame_list: k; l1_table: t
        Kind kind = Kind::plain;
        std::byte fill{};
    };

    size_t add_slot(std::byte fill, Kind kind = Kind::plain, uint64_t index = 0) {
        slots_.push_back({0, 0, index, kind, fill});
        return slots_.size() - 1;
    }

    // Shared pages for ranges without a single present pfn (all ~0).
    size_t missing_p2m() {
        if (missing_p2m_ == kNone) missing_p2m_ = add_slot(std::byte{0xff});
        return missing_p2m_;
    }

    uint64_t vaddr_base() const { return w_ == 8 ? abi::kLinearP2mVaddr64 : abi::kLinearP2mVaddr32; }

    void plan_p2m_pages() {
        std::vector<bool> dedicated(p_, false);
        for (auto& e : d_.extents)
            for (uint64_t j = e.pfn / e_; j <= (e.pfn + e.count - 1) / e_; ++j) dedicated[j] = true;
        for (auto& [pfn, v] : d_.p2m_overrides) dedicated[pfn / e_] = true;
        p2m_slot_.assign(p_, kNone);
        for (uint64_t j = 0; j < p_; ++j)
            if (dedicated[j]) p2m_slot_[j] = add_slot(std::byte{0xff}, Kind::p2m, j);
        for (uint64_t j = 0; j < p_; ++j)
            if (!dedicated[j]) p2m_slot_[j] = missing_p2m();
    }

    bool is_missing(size_t p2m_slot) const { return p2m_slot == missing_p2m_; }

    // Tree: root -> frame lists (E mfns each) -> p2m pages.
    size_t plan_tree() {
        const uint64_t f = (p_ + e_ - 1) / e_;
        if (f > e_)
            throw Error("p2m_size " + std::to_string(d_.p2m_size) + " needs " + std::to_string(f) +
                            " frame-list pages but the 3-level p2m tree holds " + std::to_string(e_) +
                            "; use p2m_format \"linear\"",
                        object_);
        size_t missing_fl = kNone;
        std::vector<size_t> fl(f, kNone);
        for (uint64_t k = 0; k < f; ++k) {
            uint64_t first = k * e_, last = std::min(p_, first + e_);
            bool any = false;
            for (uint64_t j = first; j < last; ++j) any = any || !is_missing(p2m_slot_[j]);
            if (any) {
                fl[k] = add_slot(std::byte{0xff}, Kind::frame_list, k);
            } else {
                if (missing_fl == kNone) {
                    missing_p2m();
                    missing_fl = add_slot(std::byte{0xff}, Kind::missing_frame_list);
                }
                fl[k] = missing_fl;
            }
        }
        size_t root = add_slot(std::byte{0xff});
        for (uint64_t k = 0; k < f; ++k) links_.push_back({root, k * w_, fl[k], false, 0});
        return root;
    }

    // Linear: p2m page j mapped at vaddr_base() + j * 4096. 4 levels for a
    // 64-bit guest, 3 (PAE) for a 32-bit one; every table has 512 entries of
    // 8 bytes except the PAE top (4 entries used).
    size_t plan_linear() {
        const unsigned levels = w_ == 8 ? 4 : 3;
        const uint64_t base = vaddr_base();
        const uint64_t span = p_ * kPageSize;
        const uint64_t room = w_ == 8 ? (~uint64_t{0} - base + 1) : (uint64_t{1} << 32) - base;
        if (span > room)
            throw Error("p2m_size " + std::to_string(d_.p2m_size) + " is too large for the linear p2m list at " +
                            std::to_string(base),
                        object_);
        // Tables by level: key = index of the region the table covers.
        std::vector<std::map<uint64_t, size_t>> tables(levels + 1);
        size_t missing_l1 = kNone;
        const uint64_t t1 = (p_ + 511) / 512;
        for (uint64_t t = 0; t < t1; ++t) {
            uint64_t first = t * 512, last = std::min(p_, first + 512);
            bool any = false;
            for (uint64_t j = first; j < last; ++j) any = any || !is_missing(p2m_slot_[j]);
            size_t slot;
            if (any) {
                slot = add_slot(std::byte{0}, Kind::l1_table, t);
            } else {
                if (missing_l1 == kNone) {
                    missing_p2m();
                    missing_l1 = add_slot(std::byte{0}, Kind::missing_l1_table);
                }
                slot = missing_l1;
            }
            tables[1][(base >> 21) + t] = slot;
        }
        for (unsigned level = 2; level <= levels; ++level) {
            const unsigned child_shift = 12 + 9 * (level - 1);  // bytes mapped by one entry
            for (auto& [child_key, child_slot] : tables[level - 1]) {
                uint64_t va = child_key << child_shift;
                uint64_t key = level == levels ? 0 : va >> (child_shift + 9);
                auto [it, fresh] = tables[level].try_emplace(key, kNone);
                if (fresh) it->second = add_slot(std::byte{0});
                uint64_t index = (va >> child_shift) & (level == levels && levels == 3 ? 3 : 511);
                // PAE page-directory-pointer entries take only the present bit.
                uint64_t flags = level == levels && levels == 3 ? abi::kPtePresent : abi::kPteTable;
                links_.push_back({it->second, index * 8, child_slot, true, flags});
            }
        }
        return tables[levels].begin()->second;
    }

    // Puts the structure pages on present pfns: from p2m_pages_at on, or the
    // highest present pfns.
    void place() {
        const uint64_t need = slots_.size();
        if (d_.present_pages() < need)
            throw Error("the p2m needs " + std::to_string(need) + " pages but the guest has only " +
                            std::to_string(d_.present_pages()) + " present",
                        object_);
        std::vector<uint64_t> pfns;
        if (d_.p2m_pages_at) {
            uint64_t at = *d_.p2m_pages_at;
            for (uint64_t i = 0; i < need; ++i)
                if (!d_.extent_of_pfn(at + i))
                    throw Error("p2m_pages_at " + std::to_string(at) + ": the p2m needs " + std::to_string(need) +
                                    " present pfns from there, but pfn " + std::to_string(at + i) + " is a hole",
                                object_);
            for (uint64_t i = 0; i < need; ++i) pfns.push_back(at + i);
        } else {
            for (auto it = d_.extents.rbegin(); it != d_.extents.rend() && pfns.size() < need; ++it)
                for (uint64_t i = it->count; i > 0 && pfns.size() < need; --i) pfns.push_back(it->pfn + i - 1);
            std::reverse(pfns.begin(), pfns.end());
        }
        for (size_t i = 0; i < need; ++i) {
            slots_[i].pfn = pfns[i];
            const Extent* e = d_.extent_of_pfn(pfns[i]);
            slots_[i].mfn = e->mfn + (pfns[i] - e->pfn);
        }
    }

    static void put(std::byte* page, uint64_t offset, uint64_t value, unsigned size) {
        if (size == 4) {
            uint32_t v = static_cast<uint32_t>(value);
            std::memcpy(page + offset, &v, 4);
        } else {
            std::memcpy(page + offset, &value, 8);
        }
    }

    // p2m page j: the mfns of the extents' pfns in it, then the overrides.
    void fill_p2m_entries(uint64_t j, std::byte* page) const {
        const uint64_t lo = j * e_, hi = lo + e_;
        auto e = std::upper_bound(d_.extents.begin(), d_.extents.end(), lo,
                                  [](uint64_t p, const Extent& x) { return p < x.pfn + x.count; });
        for (; e != d_.extents.end() && e->pfn < hi; ++e) {
            const uint64_t from = std::max(lo, e->pfn), to = std::min(hi, e->pfn + e->count);
            for (uint64_t pfn = from; pfn < to; ++pfn) put(page, (pfn - lo) * w_, e->mfn + (pfn - e->pfn), w_);
        }
        auto o = std::lower_bound(overrides_.begin(), overrides_.end(), lo, [](auto& x, uint64_t p) { return x.first < p; });
        for (; o != overrides_.end() && o->first < hi; ++o) put(page, (o->first - lo) * w_, o->second, w_);
    }

    const DomainSpec d_;
    std::vector<std::pair<uint64_t, uint64_t>> overrides_;  // by pfn
    const unsigned w_;
    const uint64_t e_;  // entries per p2m page
    const uint64_t p_;  // p2m pages
    const std::string object_;
    std::vector<Slot> slots_;
    std::vector<size_t> p2m_slot_;
    std::vector<Link> links_;
    size_t missing_p2m_ = kNone;
};

PvP2mLayout build_pv_p2m(const DomainSpec& d) {
    auto plan = std::make_shared<PvP2mPlan>(d);
    PvP2mLayout out = plan->build();
    out.plan = std::move(plan);
    return out;
}

void PvP2mLayout::for_each_page(const std::function<void(uint64_t pfn, const std::byte* page)>& sink) const {
    std::vector<std::byte> page(kPageSize);
    for (size_t i = 0; i < plan->slot_count(); ++i) {
        plan->make_page(i, page.data());
        sink(plan->slot_pfn(i), page.data());
    }
}

std::vector<std::byte> build_shared_info(const DomainSpec& d, const PvP2mLayout* layout) {
    std::vector<std::byte> page(kPageSize, std::byte{0});
    if (!layout) return page;
    const unsigned w = d.guest_width;
    const size_t arch = w == 8 ? abi::kSharedInfoArch64 : abi::kSharedInfoArch32;
    auto put = [&](unsigned field, uint64_t value) {
        if (w == 8) {
            std::memcpy(page.data() + arch + field * 8, &value, 8);
        } else {
            uint32_t v = static_cast<uint32_t>(value);
            std::memcpy(page.data() + arch + field * 4, &v, 4);
        }
    };
    put(abi::kMaxPfn, layout->max_pfn);
    put(abi::kFrameListList, layout->pfn_to_mfn_frame_list_list);
    put(abi::kNmiReason, 0);
    put(abi::kP2mCr3, layout->p2m_cr3);
    put(abi::kP2mVaddr, layout->p2m_vaddr);
    put(abi::kP2mGeneration, layout->p2m_generation);
    return page;
}

}  // namespace xendump::sim
