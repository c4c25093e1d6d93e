#include "fake_hypervisor.hpp"

#include <algorithm>
#include <cstring>

#include "xendump/error.hpp"

namespace xendump::test {

namespace {

class FakeMapping : public ForeignMapping {
public:
    std::vector<const std::byte*> pages;
    std::vector<int> errors;
    size_t count() const override { return pages.size(); }
    const std::byte* page(size_t i) const override { return pages.at(i); }
    int error(size_t i) const override { return errors.at(i); }
};

const Page& zero_page() {
    static const Page zero{};
    return zero;
}

}  // namespace

void FakeHypervisor::own(uint32_t domid, uint64_t mfn, uint64_t count) { owned_[mfn] = {count, domid}; }

void FakeHypervisor::populate(uint32_t domid, uint64_t gfn, uint64_t mfn, uint64_t count) {
    own(domid, mfn, count);
    domains.at(domid).gfns[gfn] = {mfn, count};
}

FakeHypervisor::Domain& FakeHypervisor::add_domain(uint32_t domid, bool hvm, unsigned width) {
    Domain& d = domains[domid];
    d.info.domid = domid;
    d.info.hvm = hvm;
    d.width = width;
    return d;
}

Page& FakeHypervisor::page(uint64_t mfn) {
    auto& p = pages_[mfn];
    if (!p) p = std::make_unique<Page>(Page{});
    return *p;
}

void FakeHypervisor::write_u64(uint64_t mfn, size_t offset, uint64_t value) {
    std::memcpy(page(mfn).data() + offset, &value, 8);
}

void FakeHypervisor::write_word(uint64_t mfn, size_t index, unsigned width, uint64_t value) {
    if (width == 8) {
        write_u64(mfn, index * 8, value);
    } else {
        uint32_t v = static_cast<uint32_t>(value);
        std::memcpy(page(mfn).data() + index * 4, &v, 4);
    }
}

std::vector<DomainInfo> FakeHypervisor::list_domains() {
    std::vector<DomainInfo> out;
    for (auto& [id, d] : domains) out.push_back(d.info);
    return out;
}

std::optional<DomainInfo> FakeHypervisor::domain_info(uint32_t domid) {
    auto it = domains.find(domid);
    if (it == domains.end()) return std::nullopt;
    return it->second.info;
}

std::optional<uint32_t> FakeHypervisor::owner_of(uint64_t mfn) const {
    auto it = owned_.upper_bound(mfn);
    if (it == owned_.begin()) return std::nullopt;
    --it;
    if (mfn - it->first >= it->second.first) return std::nullopt;
    return it->second.second;
}

std::optional<uint64_t> FakeHypervisor::translate(const Domain& d, uint64_t gfn) const {
    auto it = d.gfns.upper_bound(gfn);
    if (it == d.gfns.begin()) return std::nullopt;
    --it;
    if (gfn - it->first >= it->second.second) return std::nullopt;
    return it->second.first + (gfn - it->first);
}

std::unique_ptr<ForeignMapping> FakeHypervisor::map_foreign(uint32_t domid, std::span<const uint64_t> frames) {
    const Domain& d = domains.at(domid);
    ++map_calls;
    mapped_frames += frames.size();
    largest_batch = std::max<uint64_t>(largest_batch, frames.size());
    auto m = std::make_unique<FakeMapping>();
    for (uint64_t frame : frames) {
        std::optional<uint64_t> mfn = d.info.hvm ? translate(d, frame) : std::optional<uint64_t>(frame);
        if (!mfn || owner_of(*mfn) != domid || (d.info.hvm && d.broken.count(frame))) {
            m->pages.push_back(nullptr);
            m->errors.push_back(EINVAL);
            continue;
        }
        auto p = pages_.find(*mfn);
        m->pages.push_back(p == pages_.end() ? zero_page().data() : p->second->data());
        m->errors.push_back(0);
    }
    return m;
}

std::vector<GfnType> FakeHypervisor::gfn_types(uint32_t domid, std::span<const uint64_t> gfns) {
    if (refuse_types) throw Error("page types refused", "domain " + std::to_string(domid), std::nullopt, refuse_types);
    const Domain& d = domains.at(domid);
    ++type_calls;
    typed_gfns += gfns.size();
    std::vector<GfnType> types;
    for (uint64_t gfn : gfns) {
        std::optional<uint64_t> mfn = translate(d, gfn);
        if (!mfn || owner_of(*mfn) != domid || d.xen_pages.count(gfn))
            types.push_back(GfnType::absent);
        else
            types.push_back(d.broken.count(gfn) ? GfnType::broken : GfnType::present);
    }
    return types;
}

void set_arch_field(FakeHypervisor& hv, const PvGuest& g, unsigned width, unsigned index, uint64_t value) {
    auto& page = hv.page(g.shared_info_mfn);
    if (width == 8) {
        std::memcpy(page.data() + g.arch_offset + index * 8, &value, 8);
    } else {
        uint32_t v = static_cast<uint32_t>(value);
        std::memcpy(page.data() + g.arch_offset + index * 4, &v, 4);
    }
}

PvGuest build_pv_guest(FakeHypervisor& hv, const PvGuestSpec& spec) {
    const unsigned w = spec.width;
    const uint64_t fpp = 4096 / w;
    const uint64_t invalid = w == 8 ? ~uint64_t{0} : 0xffffffffu;
    FakeHypervisor::Domain& d = hv.add_domain(spec.domid, false, w);
    PvGuest g;

    std::vector<uint64_t> p2m(spec.p2m_size, invalid);
    for (const auto& [pfn, mfn, count] : spec.extents) {
        hv.own(spec.domid, mfn, count);
        for (uint64_t i = 0; i < count; ++i) {
            g.expected.push_back({pfn + i, mfn + i});
            if (pfn + i < p2m.size()) p2m[pfn + i] = mfn + i;
        }
    }
    std::sort(g.expected.begin(), g.expected.end(), [](const PageEntry& a, const PageEntry& b) { return a.pfn < b.pfn; });
    for (const auto& [pfn, value] : spec.p2m_overrides) p2m.at(pfn) = value;

    // Structure pages come from the highest present pfns.
    size_t pool = g.expected.size();
    auto allocate = [&]() -> uint64_t {
        if (pool == 0) throw Error("test guest too small for its p2m");
        return g.expected[--pool].gmfn;
    };

    const uint64_t nr_p2m = (spec.p2m_size + fpp - 1) / fpp;
    for (uint64_t j = 0; j < nr_p2m; ++j) {
        uint64_t mfn = allocate();
        g.p2m_page_mfns.push_back(mfn);
        for (uint64_t k = 0; k < fpp; ++k) {
            uint64_t pfn = j * fpp + k;
            hv.write_word(mfn, k, w, pfn < p2m.size() ? p2m[pfn] : invalid);
        }
    }

    if (spec.layout != P2mLayout::linear) {
        const uint64_t nr_fl = (nr_p2m + fpp - 1) / fpp;
        g.frame_list_list = allocate();
        for (uint64_t k = 0; k < fpp; ++k) hv.write_word(g.frame_list_list, k, w, invalid);
        for (uint64_t i = 0; i < nr_fl; ++i) {
            uint64_t fl = allocate();
            g.frame_list_mfns.push_back(fl);
            hv.write_word(g.frame_list_list, i, w, fl);
            for (uint64_t k = 0; k < fpp; ++k) {
                uint64_t j = i * fpp + k;
                hv.write_word(fl, k, w, j < nr_p2m ? g.p2m_page_mfns[j] : invalid);
            }
        }
    } else {
        g.frame_list_list = invalid;
    }

    if (spec.layout != P2mLayout::tree) {
        const unsigned levels = w == 8 ? 4 : 3;
        g.p2m_vaddr = w == 8 ? 0xffffc90000000000 : 0xc1000000;
        const uint64_t mask = w == 8 ? 0x0000ffffffffffff : 0xffffffff;
        std::map<std::pair<unsigned, uint64_t>, uint64_t> tables;  // (level, key) -> mfn
        auto table = [&](unsigned level, uint64_t va) {
            uint64_t key = level == levels ? 0 : va >> (12 + 9 * level);
            auto [it, fresh] = tables.try_emplace({level, key}, 0);
            if (fresh) {
                it->second = allocate();
                g.tables[level].push_back(it->second);
            }
            return it->second;
        };
        g.top_table_mfn = table(levels, 0);
        for (uint64_t j = 0; j < nr_p2m; ++j) {
            const uint64_t va = (g.p2m_vaddr + j * 4096) & mask;
            for (unsigned level = levels; level >= 1; --level) {
                const uint64_t t = table(level, va);
                const uint64_t idx = (va >> (12 + 9 * (level - 1))) & 511;
                const uint64_t target = level == 1 ? g.p2m_page_mfns[j] : table(level - 1, va);
                const uint64_t flags = (level == levels && levels == 3) ? 0x1 : 0x67;
                hv.write_u64(t, idx * 8, (target << 12) | flags);
            }
        }
        const uint64_t top = g.top_table_mfn;
        g.p2m_cr3 = w == 8 ? top << 12 : static_cast<uint32_t>((top << 12) | (top >> 20));
    }

    g.shared_info_mfn = spec.shared_info_mfn;
    hv.own(spec.domid, g.shared_info_mfn, 1);
    hv.page(g.shared_info_mfn);
    g.arch_offset = w == 8 ? 3088 : 2316;
    set_arch_field(hv, g, w, 0, spec.p2m_size);
    set_arch_field(hv, g, w, 1, g.frame_list_list);
    set_arch_field(hv, g, w, 3, g.p2m_cr3);
    set_arch_field(hv, g, w, 4, g.p2m_vaddr);

    d.info.shared_info_frame = g.shared_info_mfn;
    d.info.tot_pages = g.expected.size();
    d.info.max_pages = g.expected.size();
    d.max_gpfn = spec.p2m_size - 1;
    return g;
}

}  // namespace xendump::test
