#include "legacy_gen.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include <unistd.h>
#include <random>
#include <stdexcept>

#include "sim/pattern.hpp"

namespace xendump::test::legacy_gen {
namespace {

constexpr size_t kPage = 4096;
constexpr uint64_t kPresentRW = 0x3;
constexpr uint64_t kPteAttrs = 0x67;  // present, rw, user, accessed, dirty

void put(std::vector<std::byte>& page, size_t index, uint64_t value, unsigned width) {
    std::memcpy(page.data() + index * width, &value, width);
}

void put_at(std::byte* page, uint64_t index, uint64_t value) { std::memcpy(page + index * 8, &value, 8); }

}  // namespace

uint64_t Guest::present() const {
    return static_cast<uint64_t>(std::count_if(mfn_of_pfn.begin(), mfn_of_pfn.end(),
                                               [](uint64_t m) { return m != kNoMfn; }));
}

const char* to_string(Variant v) {
    switch (v) {
    case Variant::pv_page_list: return "pv-page-list";
    case Variant::hvm_pfn_order: return "hvm-pfn-order";
    case Variant::hvm_page_list: return "hvm-page-list";
    case Variant::pv_pfn_order: return "pv-pfn-order";
    case Variant::ocaml_damaged: return "ocaml-damaged";
    }
    return "?";
}

Guest make_guest(const GuestSpec& spec) {
    Guest g;
    g.width = spec.width;
    uint64_t n = spec.nr_pfns;
    std::mt19937_64 rng(spec.seed);
    // Machine frames in extents of random length with random gaps, like a
    // host's fragmented free memory.
    g.mfn_of_pfn.assign(n, kNoMfn);
    uint64_t mfn = 0x1000 + (rng() % 0x1000);
    for (uint64_t pfn = 0; pfn < n;) {
        uint64_t len = 1 + rng() % 64;
        for (uint64_t k = 0; k < len && pfn < n; ++k, ++pfn) g.mfn_of_pfn[pfn] = mfn++;
        mfn += 1 + rng() % 300;
    }
    for (uint64_t h : spec.hole_pfns)
        if (h < n) g.mfn_of_pfn[h] = kNoMfn;
    const size_t per_page = kPage / spec.width;
    for (uint64_t l : spec.ballooned_leaves)
        for (uint64_t pfn = l * per_page; pfn < std::min<uint64_t>(n, (l + 1) * per_page); ++pfn)
            g.mfn_of_pfn[pfn] = kNoMfn;
    g.page_of_pfn.resize(n);
    for (uint64_t pfn = 0; pfn < n; ++pfn) {
        if (g.mfn_of_pfn[pfn] == kNoMfn) continue;
        g.page_of_pfn[pfn].resize(kPage);
        sim::fill_pattern_page(static_cast<uint32_t>(spec.seed), pfn, g.page_of_pfn[pfn].data());
    }

    // Guest pages that hold kernel structures, taken from the top, skipping holes.
    uint64_t next = n;
    auto take_pfn = [&]() {
        while (next > 0) {
            --next;
            if (g.mfn_of_pfn[next] != kNoMfn) return next;
        }
        throw std::runtime_error("guest too small for its kernel structures");
    };
    auto page = [&](uint64_t pfn) -> std::vector<std::byte>& {
        auto& p = g.page_of_pfn[pfn];
        std::fill(p.begin(), p.end(), std::byte{0});
        return p;
    };

    uint64_t nr_leaves = (n + per_page - 1) / per_page;
    auto ballooned = [&](uint64_t l) {
        return std::find(spec.ballooned_leaves.begin(), spec.ballooned_leaves.end(), l) !=
               spec.ballooned_leaves.end();
    };
    // Every leaf has a page of its own, except ballooned ones when they
    // share the one missing leaf (filled below like any leaf: all ~0).
    std::vector<uint64_t> leaf_pfns;
    uint64_t missing_pfn = kNoMfn;
    if (spec.shared_missing_leaf && !spec.ballooned_leaves.empty()) missing_pfn = take_pfn();
    for (uint64_t l = 0; l < nr_leaves; ++l)
        leaf_pfns.push_back(missing_pfn != kNoMfn && ballooned(l) ? missing_pfn : take_pfn());
    if (missing_pfn != kNoMfn) g.missing_leaf_mfn = g.mfn_of_pfn[missing_pfn];
    for (uint64_t l = 0; l < nr_leaves; ++l) {
        auto& p = page(leaf_pfns[l]);
        for (size_t i = 0; i < per_page; ++i) {
            uint64_t pfn = l * per_page + i;
            uint64_t m = pfn < n ? g.mfn_of_pfn[pfn] : kNoMfn;
            put(p, i, spec.width == 4 && m == kNoMfn ? 0xFFFFFFFFu : m, spec.width);
        }
    }
    if (spec.p2m_tree) {
        uint64_t nr_middles = (nr_leaves + per_page - 1) / per_page;
        uint64_t root_pfn = take_pfn();
        g.root_mfn = g.mfn_of_pfn[root_pfn];
        std::vector<uint64_t> middle_pfns;
        for (uint64_t m = 0; m < nr_middles; ++m) middle_pfns.push_back(take_pfn());
        auto& root = page(root_pfn);
        for (uint64_t m = 0; m < nr_middles; ++m) put(root, m, g.mfn_of_pfn[middle_pfns[m]], spec.width);
        for (uint64_t m = 0; m < nr_middles; ++m) {
            auto& p = page(middle_pfns[m]);
            for (size_t i = 0; i < per_page && m * per_page + i < nr_leaves; ++i)
                put(p, i, g.mfn_of_pfn[leaf_pfns[m * per_page + i]], spec.width);
        }
    }
    if (spec.page_tables) {
        if (nr_leaves + 1 > 511) throw std::runtime_error("guest too large for the synthetic page tables");
        // Kernel mapping: VA base -> [pointer page, leaf 0, leaf 1, ...].
        uint64_t ptr_pfn = take_pfn();
        uint64_t pt_pfn = take_pfn();
        auto mfn_of = [&](uint64_t pfn) { return g.mfn_of_pfn[pfn]; };
        auto& pt = page(pt_pfn);
        put(pt, 0, (mfn_of(ptr_pfn) << 12) | kPteAttrs, 8);
        for (uint64_t l = 0; l < nr_leaves; ++l) put(pt, 1 + l, (mfn_of(leaf_pfns[l]) << 12) | kPteAttrs, 8);
        uint64_t base;
        if (spec.width == 8) {
            base = 0xffffffff80000000ull;  // PML4 511, PDPT 510, PD 0
            uint64_t pd = take_pfn(), pdpt = take_pfn(), pml4 = take_pfn();
            put(page(pd), 0, (mfn_of(pt_pfn) << 12) | kPresentRW, 8);
            put(page(pdpt), 510, (mfn_of(pd) << 12) | kPresentRW, 8);
            put(page(pml4), 511, (mfn_of(pdpt) << 12) | kPresentRW, 8);
            g.cr3_mfn = mfn_of(pml4);
        } else {
            base = 0xC0000000u;  // PAE: L3 3, L2 0
            uint64_t l2 = take_pfn(), l3 = take_pfn();
            put(page(l2), 0, (mfn_of(pt_pfn) << 12) | kPresentRW, 8);
            put(page(l3), 3, (mfn_of(l2) << 12) | 0x1, 8);
            g.cr3_mfn = mfn_of(l3);
        }
        g.p2m_symbol_va = base + 0x10;
        std::memcpy(page(ptr_pfn).data() + 0x10, &(base += 0x1000), spec.width);
    }
    return g;
}

std::vector<std::byte> make_file(const Guest& g, const FileSpec& fs) {
    const size_t ctx_size = fs.tool_width == 8 ? 5168 : 2800;
    const unsigned entry = fs.entry_size ? fs.entry_size : fs.tool_width;
    const uint64_t n = g.mfn_of_pfn.size();
    const uint64_t hvm_hole_start = 0xF0000, hvm_hole = 0x10000;

    // Slots: which pfn each stored page is, and its index entry.
    std::vector<uint64_t> slot_pfn, slot_entry;
    switch (fs.variant) {
    case Variant::pv_page_list: {
        for (uint64_t p = 0; p < n; ++p)
            if (g.mfn_of_pfn[p] != kNoMfn) slot_pfn.push_back(p);
        std::mt19937_64 rng(fs.shuffle_seed);
        if (fs.allocation_order) {
            std::vector<uint64_t> kept, ballooned;
            for (uint64_t p : slot_pfn) (rng() % 10 == 0 ? ballooned : kept).push_back(p);
            std::shuffle(ballooned.begin(), ballooned.end(), rng);
            slot_pfn = std::move(kept);
            slot_pfn.insert(slot_pfn.end(), ballooned.begin(), ballooned.end());
        } else {
            std::shuffle(slot_pfn.begin(), slot_pfn.end(), rng);
        }
        for (uint64_t p : slot_pfn) slot_entry.push_back(g.mfn_of_pfn[p]);
        break;
    }
    case Variant::hvm_page_list:
        for (uint64_t p = 0; p < n; ++p)
            if (g.mfn_of_pfn[p] != kNoMfn) {
                slot_pfn.push_back(p);
                slot_entry.push_back(g.mfn_of_pfn[p]);
            }
        break;
    case Variant::pv_pfn_order:
    case Variant::ocaml_damaged:
        for (uint64_t p = 0; p < n; ++p) {
            slot_pfn.push_back(p);
            slot_entry.push_back(g.mfn_of_pfn[p]);
        }
        break;
    case Variant::hvm_pfn_order:
        for (uint64_t s = 0;; ++s) {
            uint64_t p = s < hvm_hole_start ? s : s + hvm_hole;
            if (p >= n) break;
            slot_pfn.push_back(p);
            slot_entry.push_back(g.mfn_of_pfn[p] == kNoMfn ? kNoMfn : p);
        }
        break;
    }
    const uint64_t nr_pages = slot_pfn.size();
    const uint32_t nv = fs.nr_vcpus;
    const bool ocaml = fs.variant == Variant::ocaml_damaged;

    uint64_t ctxt_off = 24, index_off = 24 + uint64_t{nv} * ctx_size;
    uint64_t index_bytes = ocaml ? 0 : nr_pages * entry;
    uint64_t pages_off = index_off + index_bytes;
    if (fs.round_pages_offset || ocaml) pages_off = (pages_off + kPage - 1) & ~uint64_t{kPage - 1};

    std::vector<std::byte> out(pages_off + nr_pages * kPage);
    uint32_t header[6] = {fs.variant == Variant::hvm_page_list ? 0xF00FEBEEu : 0xF00FEBEDu, nv,
                          static_cast<uint32_t>(nr_pages), static_cast<uint32_t>(ctxt_off),
                          static_cast<uint32_t>(index_off), static_cast<uint32_t>(pages_off)};
    if (ocaml) std::swap(header[3], header[4]);
    std::memcpy(out.data(), header, sizeof header);

    for (uint32_t v = 0; v < nv; ++v) {
        std::byte* c = out.data() + ctxt_off + uint64_t{v} * ctx_size;
        for (size_t i = 0; i < ctx_size; ++i) c[i] = std::byte(static_cast<uint8_t>(v * 31 + i * 7));
        uint64_t flags = 1;  // VGCF_I387_VALID
        if (fs.variant == Variant::hvm_pfn_order || fs.variant == Variant::hvm_page_list) flags |= 2;
        else flags &= ~uint64_t{2};
        std::memset(c + 512, 0, fs.tool_width);
        std::memcpy(c + 512, &flags, fs.tool_width);
        uint64_t mfn = g.cr3_mfn == kNoMfn ? 0 : g.cr3_mfn;
        if (fs.tool_width == 8) {
            uint64_t cr3 = mfn << 12;
            std::memcpy(c + 5008, &cr3, 8);
        } else {
            uint32_t cr3 = static_cast<uint32_t>((mfn << 12) | (mfn >> 20));  // PAE rotation
            std::memcpy(c + 2728, &cr3, 4);
        }
    }
    if (!ocaml)
        for (uint64_t s = 0; s < nr_pages; ++s) {
            uint64_t e = slot_entry[s];
            if (entry == 4 && e == kNoMfn) e = 0xFFFFFFFFu;
            std::memcpy(out.data() + index_off + s * entry, &e, entry);
        }
    for (uint64_t s = 0; s < nr_pages; ++s) {
        const auto& p = g.page_of_pfn[slot_pfn[s]];
        if (!p.empty()) std::memcpy(out.data() + pages_off + s * kPage, p.data(), kPage);
    }
    return out;
}

std::string system_map_text(const Guest& g) {
    char line[128];
    std::snprintf(line, sizeof line, "%0*llx T _stext\n%0*llx D phys_to_machine_mapping\n", g.width * 2,
                  static_cast<unsigned long long>(g.p2m_symbol_va & ~uint64_t{0xFFFFF}), g.width * 2,
                  static_cast<unsigned long long>(g.p2m_symbol_va));
    return line;
}

namespace {

constexpr uint64_t kSparsePerPage = kPage / 8;

struct SparseTree {
    uint64_t n, leaves, middles;
    explicit SparseTree(uint64_t nr_pfns)
        : n(nr_pfns), leaves((n + kSparsePerPage - 1) / kSparsePerPage),
          middles((leaves + kSparsePerPage - 1) / kSparsePerPage) {}
    uint64_t leaf_pfn(uint64_t l) const { return n - 1 - l; }
    uint64_t root_pfn() const { return n - 1 - leaves; }
    uint64_t middle_pfn(uint64_t m) const { return n - 2 - leaves - m; }
    uint64_t first_tree_pfn() const { return n - 1 - leaves - middles; }
    // Slot of pfn p: the kept pfns in order, then the returned ones (p % 10 == 7) descending.
    uint64_t slot(uint64_t p) const {
        const uint64_t returned_below = (p + 2) / 10, returned = (n + 2) / 10;
        if (p % 10 != 7) return p - returned_below;
        return (n - returned) + (returned - 1 - returned_below);
    }
    uint64_t pfn_at(uint64_t s) const {
        const uint64_t returned = (n + 2) / 10, kept = n - returned;
        if (s >= kept) return 7 + 10 * (returned - 1 - (s - kept));
        // The s-th kept pfn: 9 kept in every 10, the 8th of each ten (index 7) left out.
        const uint64_t p = (s / 9) * 10 + s % 9;
        return p % 10 >= 7 ? p + 1 : p;
    }
};

}  // namespace

uint64_t sparse_mfn(uint64_t pfn) { return 0x10000 + pfn + (pfn / 64) * 3; }

bool sparse_page(uint64_t nr_pfns, uint64_t pfn, std::byte* page) {
    const SparseTree t(nr_pfns);
    auto fill = [&](uint64_t count, auto&& entry) {
        std::fill(page, page + kPage, std::byte{0});
        for (uint64_t i = 0; i < count; ++i) put_at(page, i, entry(i));
        return true;
    };
    if (pfn >= t.first_tree_pfn()) {
        if (pfn == t.root_pfn()) return fill(t.middles, [&](uint64_t m) { return sparse_mfn(t.middle_pfn(m)); });
        if (pfn > t.root_pfn()) {
            const uint64_t l = t.n - 1 - pfn;
            return fill(kSparsePerPage, [&](uint64_t i) {
                const uint64_t q = l * kSparsePerPage + i;
                return q < t.n ? sparse_mfn(q) : kNoMfn;
            });
        }
        const uint64_t m = t.n - 2 - t.leaves - pfn;
        return fill(std::min(kSparsePerPage, t.leaves - m * kSparsePerPage),
                    [&](uint64_t i) { return sparse_mfn(t.leaf_pfn(m * kSparsePerPage + i)); });
    }
    if (pfn % 4096 != 1) return false;
    sim::fill_pattern_page(1, pfn, page);
    return true;
}

void write_sparse_pv_page_list(const std::filesystem::path& path, uint64_t n) {
    const SparseTree t(n);
    if (n < 4096 || t.middles > kSparsePerPage) throw std::runtime_error("sparse guest size out of range");
    const uint64_t ctx = 5168, index_off = 24 + ctx;
    const uint64_t pages_off = (index_off + n * 8 + kPage - 1) & ~uint64_t{kPage - 1};
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot create " + path.string());
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
    auto at = [&](uint64_t off, const void* data, size_t size) {
        if (std::fseek(f, static_cast<long>(off), SEEK_SET) != 0 || std::fwrite(data, 1, size, f) != size)
            throw std::runtime_error("cannot write " + path.string());
    };
    const uint32_t header[6] = {0xF00FEBEDu, 1, static_cast<uint32_t>(n), 24, static_cast<uint32_t>(index_off),
                                static_cast<uint32_t>(pages_off)};
    at(0, header, sizeof header);
    std::vector<std::byte> c(ctx);
    for (size_t i = 0; i < ctx; ++i) c[i] = std::byte(static_cast<uint8_t>(i * 7));
    const uint64_t flags = 1;  // VGCF_I387_VALID; not HVM
    std::memcpy(c.data() + 512, &flags, 8);
    std::memset(c.data() + 5008, 0, 8);
    at(24, c.data(), c.size());
    std::vector<uint64_t> entries;
    for (uint64_t s = 0; s < n; s += entries.size()) {
        entries.resize(static_cast<size_t>(std::min<uint64_t>(1 << 17, n - s)));
        for (size_t k = 0; k < entries.size(); ++k) entries[k] = sparse_mfn(t.pfn_at(s + k));
        at(index_off + s * 8, entries.data(), entries.size() * 8);
    }
    std::vector<std::byte> page(kPage);
    auto write_page = [&](uint64_t pfn) {
        if (sparse_page(n, pfn, page.data())) at(pages_off + t.slot(pfn) * kPage, page.data(), kPage);
    };
    for (uint64_t pfn = 1; pfn < t.first_tree_pfn(); pfn += 4096) write_page(pfn);
    for (uint64_t pfn = t.first_tree_pfn(); pfn < n; ++pfn) write_page(pfn);
    if (std::fflush(f) != 0 || ::ftruncate(::fileno(f), static_cast<off_t>(pages_off + n * kPage)) != 0)
        throw std::runtime_error("cannot size " + path.string());
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace xendump::test::legacy_gen
