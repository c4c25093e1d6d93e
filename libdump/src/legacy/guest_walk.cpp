#include "legacy/guest_walk.hpp"

#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "legacy/hex.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {
namespace {

using util::kPage;
constexpr uint64_t kPresent = 0x1;
constexpr uint64_t kLarge = 0x80;  // PSE
constexpr uint64_t kAddrMask = 0x000FFFFFFFFFF000ull;
// ctrlreg[3] inside vcpu_guest_context (doc/legacy-formats.md 3).
constexpr size_t kCr3At64 = 5008;
constexpr size_t kCr3At32 = 2728;
// A p2m larger than this many entries is not a plausible guest (64 GiB of 4 KiB).
constexpr uint64_t kMaxPfns = uint64_t{1} << 24;

enum class Paging { four_level, pae, two_level };

class Translator {
public:
    Translator(const ByteSource& src, const XcCoreFile& f, const MfnIndex& slots, Paging paging, uint64_t top_mfn)
        : src_(src), f_(f), slots_(slots), paging_(paging), top_(top_mfn) {}

    // Machine frame + offset of a virtual address, or nullopt.
    std::optional<uint64_t> translate(uint64_t va) const {
        switch (paging_) {
        case Paging::four_level: {
            static constexpr unsigned shifts[] = {39, 30, 21, 12};
            uint64_t mfn = top_;
            for (unsigned lvl = 0; lvl < 4; ++lvl) {
                auto e = entry(mfn, (va >> shifts[lvl]) & 511, 8);
                if (!e || !(*e & kPresent)) return std::nullopt;
                if ((lvl == 1 || lvl == 2) && (*e & kLarge)) {
                    uint64_t mask = (uint64_t{1} << shifts[lvl]) - 1;
                    return ((*e & kAddrMask) & ~mask) | (va & mask);
                }
                mfn = (*e & kAddrMask) >> 12;
            }
            return (mfn << 12) | (va & 0xFFF);
        }
        case Paging::pae: {
            auto l3 = entry(top_, (va >> 30) & 3, 8);
            if (!l3 || !(*l3 & kPresent)) return std::nullopt;
            auto l2 = entry((*l3 & kAddrMask) >> 12, (va >> 21) & 511, 8);
            if (!l2 || !(*l2 & kPresent)) return std::nullopt;
            if (*l2 & kLarge) return ((*l2 & kAddrMask) & ~uint64_t{0x1FFFFF}) | (va & 0x1FFFFF);
            auto l1 = entry((*l2 & kAddrMask) >> 12, (va >> 12) & 511, 8);
            if (!l1 || !(*l1 & kPresent)) return std::nullopt;
            return (*l1 & kAddrMask) | (va & 0xFFF);
        }
        case Paging::two_level: {
            auto l2 = entry(top_, (va >> 22) & 1023, 4);
            if (!l2 || !(*l2 & kPresent)) return std::nullopt;
            if (*l2 & kLarge) return (*l2 & 0xFFC00000u) | (va & 0x3FFFFF);
            auto l1 = entry((*l2 & 0xFFFFF000u) >> 12, (va >> 12) & 1023, 4);
            if (!l1 || !(*l1 & kPresent)) return std::nullopt;
            return (*l1 & 0xFFFFF000u) | (va & 0xFFF);
        }
        }
        return std::nullopt;
    }

    // Reads `out.size()` bytes at virtual address `va` (may cross pages).
    bool read_virtual(uint64_t va, std::span<std::byte> out) const {
        size_t done = 0;
        while (done < out.size()) {
            auto ma = translate(va + done);
            if (!ma) return false;
            const auto slot = slots_.slot_of(*ma >> 12);
            if (!slot) return false;
            uint64_t in_page = *ma & 0xFFF;
            size_t n = std::min<uint64_t>(out.size() - done, kPage - in_page);
            src_.read(f_.page_offset(*slot) + in_page, out.subspan(done, n), "guest page");
            done += n;
        }
        return true;
    }

private:
    std::optional<uint64_t> entry(uint64_t mfn, uint64_t idx, size_t size) const {
        const auto slot = slots_.slot_of(mfn);
        if (!slot) return std::nullopt;
        uint64_t v = 0;
        std::byte raw[8];
        src_.read(f_.page_offset(*slot) + idx * size, std::span(raw, size), "page table");
        std::memcpy(&v, raw, size);
        return v;
    }

    const ByteSource& src_;
    const XcCoreFile& f_;
    const MfnIndex& slots_;
    Paging paging_;
    uint64_t top_;
};

uint64_t read_word(std::span<const std::byte> b, size_t at, size_t width) {
    uint64_t v = 0;
    std::memcpy(&v, b.data() + at, width);
    return v;
}

// Calls f(pfn, mfn) for p2m[0..] in pfn order (~0 of a 32-bit guest left
// out), a chunk at a time (what is left of the array's page), while more(pfn)
// holds at the start of a chunk and until f returns false. Returns the pfn
// where it stopped; `unmapped_at` is set when a chunk was not mapped.
template <class More, class F>
uint64_t for_each_p2m(const Translator& t, size_t w, uint64_t array_va, More&& more, F&& f,
                      std::optional<uint64_t>& unmapped_at) {
    std::vector<std::byte> chunk(kPage);
    uint64_t pfn = 0;
    while (more(pfn)) {
        uint64_t va = array_va + pfn * w;
        size_t n = static_cast<size_t>(kPage - (va & 0xFFF));
        if (!t.read_virtual(va, std::span(chunk.data(), n))) {
            unmapped_at = va;
            return pfn;
        }
        for (size_t i = 0; i + w <= n; i += w, ++pfn) {
            uint64_t mfn = read_word(chunk, i, w);
            if (w == 4 && mfn == 0xFFFFFFFFu) continue;
            if (!f(pfn, mfn)) return pfn;
        }
    }
    return pfn;
}

// Walks p2m[0..] until every dumped mfn has a pfn.
std::optional<PfnRecovery> walk_p2m(const Translator& t, const XcCoreFile& f, const MfnIndex& slots,
                                    uint64_t pointer_va, const char* paging_name, std::string& detail) {
    size_t w = f.guest_width;
    std::byte ptr_raw[8]{};
    if (!t.read_virtual(pointer_va, std::span(ptr_raw, w))) {
        detail = std::string("phys_to_machine_mapping at ") + hex(pointer_va) + " is not mapped (" +
                 paging_name + " walk)";
        return std::nullopt;
    }
    uint64_t array_va = read_word(ptr_raw, 0, w);
    SparseBitmap seen = slots.frame_bitmap();
    PfnCheck check(slots, seen);
    bool ok = true;
    std::optional<uint64_t> unmapped_at;
    const uint64_t end = for_each_p2m(
        t, w, array_va, [&](uint64_t pfn) { return pfn < kMaxPfns && !check.complete(); },
        [&](uint64_t pfn, uint64_t mfn) { return ok = check.add(pfn, mfn); }, unmapped_at);
    // The recovery walks the same chunks again, the dumped mfns only.
    auto walk = [t, w, array_va, end, &slots](const std::function<void(uint64_t, uint64_t)>& fn) {
        std::optional<uint64_t> unmapped;
        for_each_p2m(
            t, w, array_va, [&](uint64_t pfn) { return pfn < end; },
            [&](uint64_t pfn, uint64_t mfn) {
                if (slots.contains(mfn)) fn(pfn, mfn);
                return true;
            },
            unmapped);
    };
    if (unmapped_at) {
        detail = "p2m array at " + hex(array_va) + " ends (unmapped at " + hex(*unmapped_at) + ") after " +
                 std::to_string(check.found()) + " of " + std::to_string(check.expected()) + " mfns";
        return std::nullopt;
    }
    if (!ok) {
        detail = "p2m array at " + hex(array_va) + ": " + conflict_text(walk, check.twice_mfn(), check.twice_pfn());
        return std::nullopt;
    }
    if (!check.complete()) {
        detail = "p2m array at " + hex(array_va) + " maps only " + std::to_string(check.found()) + " of " +
                 std::to_string(check.expected()) + " dumped mfns";
        return std::nullopt;
    }
    return PfnRecovery{walk, std::string("system-map:") + paging_name + ":phys_to_machine_mapping=" + hex(pointer_va)};
}

}  // namespace

uint64_t system_map_symbol(const std::string& path, const std::string& symbol) {
    std::ifstream in(path);
    if (!in) throw Error("cannot read System.map", path);
    std::string line;
    uint64_t line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        std::istringstream ls(line);
        std::string addr, type, name;
        if (!(ls >> addr >> type >> name) || name != symbol) continue;
        try {
            size_t used = 0;
            uint64_t v = std::stoull(addr, &used, 16);
            if (used == addr.size()) return v;
        } catch (const std::exception&) {
        }
        throw Error("line " + std::to_string(line_no) + ": bad address '" + addr + "' for " + symbol, path);
    }
    throw Error("symbol " + symbol + " not found", path);
}

WalkResult recover_pfns_by_symbol(const ByteSource& src, const XcCoreFile& f, const MfnIndex& slots,
                                  uint64_t pointer_va) {
    WalkResult r;
    const auto& ctx = f.contexts.at(0);
    std::vector<std::pair<Paging, uint64_t>> tries;
    if (f.guest_width == 8) {
        tries.push_back({Paging::four_level, (read_word(ctx, kCr3At64, 8) & kAddrMask) >> 12});
    } else {
        uint32_t cr3 = static_cast<uint32_t>(read_word(ctx, kCr3At32, 4));
        // PAE guests store the MFN rotated (xen_pfn_to_cr3); 2-level guests
        // shifted. For MFNs below 2^20 both read the same.
        tries.push_back({Paging::pae, static_cast<uint32_t>((cr3 >> 12) | (cr3 << 20))});
        tries.push_back({Paging::two_level, cr3 >> 12});
    }
    std::string details;
    for (auto [paging, top] : tries) {
        const char* name = paging == Paging::four_level ? "4-level" : paging == Paging::pae ? "pae" : "2-level";
        if (!slots.contains(top)) {
            details += std::string(details.empty() ? "" : "; ") + name + ": cr3 mfn " + hex(top) + " is not in the dump";
            continue;
        }
        Translator t(src, f, slots, paging, top);
        std::string detail;
        if (auto rec = walk_p2m(t, f, slots, pointer_va, name, detail)) {
            r.recovery = std::move(rec);
            return r;
        }
        details += std::string(details.empty() ? "" : "; ") + detail;
    }
    r.detail = "page-table walk from vcpu 0 cr3: " + details;
    return r;
}

}  // namespace xendump::legacy
