// PV p2m in guest memory (see pv_p2m_builder.hpp). Two phases: first decide
// which structure pages exist and how they link (no mfns known yet), then
// place them on present pfns and write the entries.
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

// One entry of a structure page that points at another structure page.
struct Link {
    size_t parent;
    size_t offset;  // byte offset in the parent page
    size_t child;
    bool pte;       // page-table entry (mfn << 12 | flags) or a bare mfn at guest width
    uint64_t flags;
};

class Builder {
public:
    explicit Builder(const DomainSpec& d)
        : d_(d), w_(d.guest_width), e_(kPageSize / d.guest_width),
          p_((d.p2m_size + e_ - 1) / e_), object_("domain " + std::to_string(d.domid)) {}

    PvP2mLayout build() {
        plan_p2m_pages();
        bool tree = d_.p2m_format != P2mFormat::linear;
        bool linear = d_.p2m_format != P2mFormat::tree;
        size_t root = tree ? plan_tree() : kNone;
        size_t top = linear ? plan_linear() : kNone;
        place();
        fill_p2m_entries();
        resolve_links();

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
        for (auto& s : slots_) out.pages.push_back({s.pfn, std::move(s.bytes)});
        std::sort(out.pages.begin(), out.pages.end(), [](auto& a, auto& b) { return a.pfn < b.pfn; });
        return out;
    }

private:
    struct Slot {
        std::vector<std::byte> bytes;
        uint64_t pfn = 0;
        uint64_t mfn = 0;
    };

    size_t add_slot(std::byte fill) {
        slots_.push_back({std::vector<std::byte>(kPageSize, fill), 0, 0});
        return slots_.size() - 1;
    }

    // Shared pages for ranges without a single present pfn.
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
            if (dedicated[j]) p2m_slot_[j] = add_slot(std::byte{0xff});
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
                fl[k] = add_slot(std::byte{0xff});
                for (uint64_t j = first; j < last; ++j) links_.push_back({fl[k], (j - first) * w_, p2m_slot_[j], false, 0});
            } else {
                if (missing_fl == kNone) {
                    missing_fl = add_slot(std::byte{0xff});
                    for (uint64_t i = 0; i < e_; ++i) links_.push_back({missing_fl, i * w_, missing_p2m(), false, 0});
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
                slot = add_slot(std::byte{0});
                for (uint64_t j = first; j < last; ++j)
                    links_.push_back({slot, (j - first) * 8, p2m_slot_[j], true, abi::kPteTable});
            } else {
                if (missing_l1 == kNone) {
                    missing_l1 = add_slot(std::byte{0});
                    for (uint64_t i = 0; i < 512; ++i)
                        links_.push_back({missing_l1, i * 8, missing_p2m(), true, abi::kPteTable});
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

    void put(std::vector<std::byte>& page, size_t offset, uint64_t value, unsigned size) {
        if (size == 4) {
            uint32_t v = static_cast<uint32_t>(value);
            std::memcpy(page.data() + offset, &v, 4);
        } else {
            std::memcpy(page.data() + offset, &value, 8);
        }
    }

    void fill_p2m_entries() {
        for (auto& e : d_.extents)
            for (uint64_t i = 0; i < e.count; ++i) {
                uint64_t pfn = e.pfn + i;
                put(slots_[p2m_slot_[pfn / e_]].bytes, (pfn % e_) * w_, e.mfn + i, w_);
            }
        for (auto& [pfn, value] : d_.p2m_overrides) put(slots_[p2m_slot_[pfn / e_]].bytes, (pfn % e_) * w_, value, w_);
    }

    void resolve_links() {
        for (auto& l : links_) {
            uint64_t mfn = slots_[l.child].mfn;
            if (l.pte) put(slots_[l.parent].bytes, l.offset, (mfn << 12) | l.flags, 8);
            else put(slots_[l.parent].bytes, l.offset, mfn, w_);
        }
    }

    const DomainSpec& d_;
    const unsigned w_;
    const uint64_t e_;  // entries per p2m page
    const uint64_t p_;  // p2m pages
    const std::string object_;
    std::vector<Slot> slots_;
    std::vector<size_t> p2m_slot_;
    std::vector<Link> links_;
    size_t missing_p2m_ = kNone;
};

}  // namespace

PvP2mLayout build_pv_p2m(const DomainSpec& d) { return Builder(d).build(); }

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
