// Finding kallsyms by its shape in guest-physical memory and decoding it.
// Layout facts: Linux 6.1 scripts/kallsyms.c (write_src) and
// kernel/kallsyms.c (kallsyms_expand_symbol, kallsyms_sym_address).
//
// The search anchors on kallsyms_token_index, the most regular table:
// u16[256] starting at 0, strictly increasing by at least 2 (each token is at
// least one character and its NUL). The token table must end right before it
// (8-aligned) with NULs exactly where the index says. Walking back from the
// token table, kallsyms_relative_base (a kernel-image address) followed by
// kallsyms_num_syms (u32, then zero padding) must start a names table that
// decodes to exactly num_syms entries, followed by markers that agree with
// the decoded entry offsets and end (maybe after kallsyms_seqs_of_names)
// where the token table starts.
//
// Guest memory is hostile: it may hold any number of look-alike tables. The
// token index check reads each window byte a bounded number of times (see
// read_token_index), but what follows a candidate (the token table, the
// walk back over up to 64 MiB for relative_base, the names) is not bounded
// per byte of the window. That work is counted against KallsymsOptions::work_limit; the search gives up
// (nullopt, KallsymsSearchStats::gave_up) when it is spent, so a guest full
// of look-alikes costs bounded time and memory, never more.
#include "xendump/kernel/kallsyms.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "xendump/error.hpp"

namespace xendump::kernel {
namespace {

constexpr uint64_t align8(uint64_t x) { return (x + 7) & ~uint64_t{7}; }
constexpr size_t kTokens = 256;
constexpr uint32_t kMinSymbols = 1000;
constexpr uint32_t kMaxSymbols = kMaxKallsymsSymbols;
constexpr uint64_t kMaxNamesBytes = 64ULL << 20;
constexpr uint64_t kMaxTokenTable = 16384;
// KSYM_NAME_LEN is 512 since Linux 6.1 (128 before), with the type character.
constexpr size_t kMaxNameLength = 512;
constexpr std::string_view kBannerPrefix = "Linux version ";

using TokenIndex = std::array<uint16_t, kTokens>;
using Tokens = std::array<std::string, kTokens>;

// Thrown when the search has spent its work limit; caught in find_kallsyms.
struct WorkLimitReached {};

// The work beyond the linear pass, and the cancel flag.
class Budget {
public:
    Budget(const KallsymsOptions& options, KallsymsSearchStats& stats) : options_(options), stats_(stats) {}

    // Before examining `bytes` more guest bytes for a candidate.
    void charge(uint64_t bytes) {
        stats_.work += bytes;
        if (stats_.work > options_.work_limit) throw WorkLimitReached{};
        if ((stats_.work >> 20) != checked_) {
            checked_ = stats_.work >> 20;
            check_cancel();
        }
    }
    void check_cancel() const {
        if (options_.cancel && options_.cancel->load()) throw Error("cancelled");
    }
    KallsymsSearchStats& stats() { return stats_; }

private:
    const KallsymsOptions& options_;
    KallsymsSearchStats& stats_;
    uint64_t checked_ = 0;
};

bool token_char(std::byte b) {
    const auto c = static_cast<unsigned char>(b);
    return c > 0x20 && c < 0x7f;
}

// Reads entry by entry and stops at the first that breaks the rule: a
// candidate reads at most 512 bytes, so a window byte is read by at most 64
// candidates (and only short prefixes overlap: an index starts with 0 and
// grows, so no valid one starts inside another).
std::optional<TokenIndex> read_token_index(PhysicalMemory& m, uint64_t at) {
    TokenIndex idx;
    for (size_t i = 0; i < kTokens; ++i) {
        auto v = m.get<uint16_t>(at + 2 * i);
        if (!v) return std::nullopt;
        idx[i] = *v;
        if (i == 0 ? idx[0] != 0 : idx[i] < idx[i - 1] + 2) return std::nullopt;
    }
    if (idx[kTokens - 1] > kMaxTokenTable) return std::nullopt;
    return idx;
}

// The token table that ends (8-aligned, zero-padded) right before `index_at`.
std::optional<std::pair<uint64_t, Tokens>> read_token_table(PhysicalMemory& m, Budget& budget,
                                                            uint64_t index_at, const TokenIndex& idx) {
    const uint64_t shortest = align8(uint64_t{idx[kTokens - 1]} + 2);
    for (uint64_t size = shortest; size <= shortest + 256 && size <= index_at; size += 8) {
        const uint64_t at = index_at - size;
        budget.charge(size);
        std::vector<std::byte> buf(size);
        if (!m.read(at, buf)) return std::nullopt;
        Tokens tokens;
        bool ok = true;
        for (size_t i = 0; ok && i < kTokens; ++i) {
            size_t p = idx[i];
            const size_t end = i + 1 < kTokens ? size_t{idx[i + 1]} - 1 : size;
            while (p < end && token_char(buf[p])) ++p;
            ok = p > idx[i] && p < size && buf[p] == std::byte{0} && (i + 1 == kTokens || p == end);
            if (ok) tokens[i].assign(reinterpret_cast<const char*>(buf.data() + idx[i]), p - idx[i]);
            if (ok && i + 1 == kTokens)  // then only padding up to the index
                ok = std::all_of(buf.begin() + static_cast<long>(p), buf.end(),
                                 [](std::byte b) { return b == std::byte{0}; }) &&
                     size - p <= 8;
        }
        if (ok) return std::make_pair(at, std::move(tokens));
    }
    return std::nullopt;
}

struct Decoded {
    std::vector<KernelSymbol> symbols;
    KallsymsLocation where;
};

// Decodes the tables assuming kallsyms_relative_base is at `base_at`.
std::optional<Decoded> decode_from_base(PhysicalMemory& m, Budget& budget, uint64_t base_at,
                                        uint64_t table_at, uint64_t index_at, const Tokens& tokens) {
    auto base = m.get<uint64_t>(base_at);
    auto count = m.get<uint32_t>(base_at + 8);
    auto pad = m.get<uint32_t>(base_at + 12);
    if (!base || !count || !pad || *pad != 0 || !is_kernel_image_address(*base) ||
        *count < kMinSymbols || *count > kMaxSymbols)
        return std::nullopt;
    const uint32_t n = *count;
    const uint64_t names_at = base_at + 16;
    if (table_at <= names_at || table_at - names_at > kMaxNamesBytes) return std::nullopt;
    budget.charge(table_at - names_at);
    std::vector<std::byte> names(table_at - names_at);
    if (!m.read(names_at, names)) return std::nullopt;

    // Entry i: a length (one byte, or two when bit 7 is set), then that many token codes.
    std::vector<uint32_t> starts(n);
    size_t pos = 0;
    for (uint32_t i = 0; i < n; ++i) {
        if (pos >= names.size()) return std::nullopt;
        starts[i] = static_cast<uint32_t>(pos);
        size_t len = static_cast<uint8_t>(names[pos++]);
        if (len & 0x80) {
            if (pos >= names.size()) return std::nullopt;
            len = (len & 0x7f) | (size_t{static_cast<uint8_t>(names[pos++])} << 7);
        }
        if (len == 0 || names.size() - pos < len) return std::nullopt;
        pos += len;
    }
    const uint64_t markers_at = align8(names_at + pos);
    const uint64_t nr_markers = (uint64_t{n} + 255) / 256;
    unsigned marker_size = 0;
    uint64_t seqs_at = 0;
    for (unsigned size : {4u, 8u}) {
        // Kernels with kallsyms_seqs_of_names (v6.2, backported to some 6.1
        // stable kernels) put u8[3][N] between the markers and the tokens.
        const uint64_t markers_end = align8(markers_at + nr_markers * size);
        if (markers_end == table_at) {
            seqs_at = 0;
        } else if (align8(markers_end + uint64_t{n} * 3) == table_at) {
            seqs_at = markers_end;
        } else {
            continue;
        }
        bool ok = true;
        for (uint64_t k = 0; ok && k < nr_markers; ++k) {
            std::optional<uint64_t> v;
            if (size == 4) {
                if (auto x = m.get<uint32_t>(markers_at + 4 * k)) v = *x;
            } else {
                v = m.get<uint64_t>(markers_at + 8 * k);
            }
            ok = v && *v == starts[k * 256];
        }
        if (ok) {
            marker_size = size;
            break;
        }
    }
    if (marker_size == 0) return std::nullopt;
    if (seqs_at != 0) {
        // Each entry is a big-endian 24-bit symbol index: all below N.
        budget.charge(uint64_t{n} * 3);
        std::vector<std::byte> seqs(uint64_t{n} * 3);
        if (!m.read(seqs_at, seqs)) return std::nullopt;
        for (size_t i = 0; i < seqs.size(); i += 3) {
            const uint32_t v = (uint32_t{static_cast<uint8_t>(seqs[i])} << 16) |
                               (uint32_t{static_cast<uint8_t>(seqs[i + 1])} << 8) |
                               static_cast<uint8_t>(seqs[i + 2]);
            if (v >= n) return std::nullopt;
        }
    }

    const uint64_t offsets_bytes = align8(uint64_t{n} * 4);
    if (base_at < offsets_bytes) return std::nullopt;
    const uint64_t offsets_at = base_at - offsets_bytes;
    budget.charge(offsets_bytes);
    std::vector<int32_t> offsets(n);
    if (!m.read(offsets_at, std::as_writable_bytes(std::span(offsets)))) return std::nullopt;
    // CONFIG_KALLSYMS_ABSOLUTE_PERCPU (x86_64 SMP): non-negative offsets are
    // absolute values (per-cpu variables), negative ones are
    // relative_base - 1 - offset. Without it every offset is an unsigned
    // displacement from relative_base, and none looks negative.
    const bool absolute_percpu =
        std::any_of(offsets.begin(), offsets.end(), [](int32_t o) { return o < 0; });

    Decoded d;
    d.symbols.reserve(n);
    std::string expanded;
    for (uint32_t i = 0; i < n; ++i) {
        size_t p = starts[i];
        size_t len = static_cast<uint8_t>(names[p++]);
        if (len & 0x80) len = (len & 0x7f) | (size_t{static_cast<uint8_t>(names[p++])} << 7);
        expanded.clear();
        for (size_t j = 0; j < len && expanded.size() <= kMaxNameLength; ++j)
            expanded += tokens[static_cast<uint8_t>(names[p + j])];
        if (expanded.size() < 2) return std::nullopt;  // a type character and a name
        // A name no kernel can have: long tokens repeated make up to 2 MiB
        // per entry, which must not become memory.
        if (expanded.size() > kMaxNameLength) return std::nullopt;
        budget.charge(expanded.size());
        const int32_t o = offsets[i];
        uint64_t address;
        if (!absolute_percpu)
            address = *base + static_cast<uint32_t>(o);
        else if (o >= 0)
            address = static_cast<uint64_t>(o);
        else
            address = *base - 1 - static_cast<uint64_t>(static_cast<int64_t>(o));
        d.symbols.push_back(KernelSymbol{expanded.substr(1), address, expanded[0]});
    }
    d.where = KallsymsLocation{offsets_at, base_at,     base_at + 8, names_at, markers_at,
                               table_at,   index_at,    marker_size, seqs_at,  absolute_percpu};
    return d;
}

// Walks back from the token table looking for relative_base/num_syms.
std::optional<Decoded> decode_before(PhysicalMemory& m, Budget& budget, uint64_t table_at,
                                     uint64_t index_at, const Tokens& tokens) {
    const uint64_t lowest = table_at > kMaxNamesBytes + 16 ? table_at - kMaxNamesBytes - 16 : 0;
    // relative_base is a kernel-image address (top u16 0xffff); num_syms is
    // followed by zero padding.
    auto try_base = [&](uint64_t at, uint32_t pad, uint16_t top) -> std::optional<Decoded> {
        if (pad != 0 || top != 0xffff) return std::nullopt;
        return decode_from_base(m, budget, at, table_at, index_at, tokens);
    };
    uint64_t at = (table_at & ~uint64_t{7}) - 16;
    while (at >= lowest && at < table_at) {
        const uint64_t page_start = at & ~(kPageSize - 1);
        const std::byte* page = at + 16 <= page_start + kPageSize ? m.page(at / kPageSize) : nullptr;
        if (page == nullptr) {
            // Across a page boundary, or a page that is not there.
            budget.charge(8);
            auto pad = m.get<uint32_t>(at + 12);
            if (!pad) return std::nullopt;  // left the present memory
            auto top = m.get<uint16_t>(at + 6);
            if (top)
                if (auto d = try_base(at, *pad, *top)) return d;
            if (at < 8) break;
            at -= 8;
            continue;
        }
        // Every position of this page at or below `at`, without a call each.
        const uint64_t stop = std::max(lowest, page_start);
        budget.charge(at - stop + 8);
        for (;;) {
            uint32_t pad;
            uint16_t top;
            std::memcpy(&pad, page + (at - page_start) + 12, sizeof pad);
            std::memcpy(&top, page + (at - page_start) + 6, sizeof top);
            if (pad == 0 && top == 0xffff) {
                if (auto d = try_base(at, pad, top)) return d;
                page = m.page(at / kPageSize);  // decoding reused the page cache
                if (page == nullptr) return std::nullopt;
            }
            if (at < stop + 8) break;
            at -= 8;
        }
        if (at < 8) break;
        at -= 8;
    }
    return std::nullopt;
}

// Every SYMBOL() of vmcoreinfo naming a kernel-image address that the table
// holds must have that address. (Values outside the image, e.g.
// SYMBOL(mem_section), are the contents of a pointer variable, not an address.)
std::optional<size_t> verify(const SymbolTable& table, const Vmcoreinfo* info) {
    if (info == nullptr) return 0;
    size_t matched = 0;
    for (const auto& [name, value] : info->symbols()) {
        if (!is_kernel_image_address(value)) continue;
        const KernelSymbol* s = table.find(name);
        if (s == nullptr) continue;
        if (s->address != value) return std::nullopt;
        ++matched;
    }
    return matched;
}

std::optional<Kallsyms> finish(Decoded d, const Vmcoreinfo* info) {
    Kallsyms k;
    k.table = SymbolTable(std::move(d.symbols));
    k.where = d.where;
    auto matched = verify(k.table, info);
    if (!matched) return std::nullopt;
    k.verified_symbols = *matched;
    if (info != nullptr) {
        k.phys_base = info->phys_base();
        k.phys_base_from_vmcoreinfo = true;
    }
    return k;
}

std::optional<Decoded> decode_at_index(PhysicalMemory& m, Budget& budget, uint64_t index_at) {
    auto idx = read_token_index(m, index_at);
    if (!idx) return std::nullopt;
    ++budget.stats().index_candidates;
    auto table = read_token_table(m, budget, index_at, *idx);
    if (!table) return std::nullopt;
    ++budget.stats().table_candidates;
    return decode_before(m, budget, table->first, index_at, table->second);
}

// Cheap test on 8 bytes: the first four token_index entries.
bool index_head(const std::byte* p) {
    uint16_t a[4];
    std::memcpy(a, p, sizeof a);
    return a[0] == 0 && a[1] >= 2 && a[1] <= 64 && a[2] >= a[1] + 2 && a[3] >= a[2] + 2 &&
           a[3] - a[2] <= 64;
}

// Without vmcoreinfo: phys_base such that linux_banner's address lands on
// "Linux version " text and init_uts_ns on a "Linux" sysname.
std::optional<uint64_t> derive_phys_base(PhysicalMemory& m, const SymbolTable& table,
                                         const std::vector<uint64_t>& banner_hits) {
    auto banner = table.address("linux_banner");
    if (!banner || !is_kernel_image_address(*banner)) return std::nullopt;
    auto uts = table.address("init_uts_ns");
    for (uint64_t hit : banner_hits) {
        const uint64_t phys_base = hit - (*banner - kStartKernelMap);
        if (phys_base % kPageSize != 0) continue;
        if (uts) {
            std::array<char, 64> head{};
            if (!m.read(kernel_virt_to_phys(*uts, phys_base), std::as_writable_bytes(std::span(head))))
                continue;
            const std::string_view sv(head.data(), head.size());
            if (sv.find(std::string_view("Linux\0", 6)) == std::string_view::npos) continue;
        }
        return phys_base;
    }
    return std::nullopt;
}

std::optional<Kallsyms> search(PhysicalMemory& m, Budget& budget, const Vmcoreinfo* info,
                               const KallsymsOptions& options) {
    const uint64_t phys_base = info ? info->phys_base() : 0;

    // 1. Some kernels list the tables in vmcoreinfo: no search at all.
    if (info != nullptr) {
        auto index = info->symbol("kallsyms_token_index");
        auto base = info->symbol("kallsyms_relative_base");
        if (index && base && is_kernel_image_address(*index) && is_kernel_image_address(*base)) {
            const uint64_t index_at = kernel_virt_to_phys(*index, phys_base);
            auto idx = read_token_index(m, index_at);
            auto table = idx ? read_token_table(m, budget, index_at, *idx) : std::nullopt;
            auto d = table ? decode_from_base(m, budget, kernel_virt_to_phys(*base, phys_base), table->first,
                                              index_at, table->second)
                           : std::nullopt;
            if (d)
                if (auto k = finish(std::move(*d), info)) return k;
        }
    }

    // 2. Shape search through the kernel image (from _stext when known).
    uint64_t start = options.scan_start;
    if (info != nullptr)
        if (auto stext = info->symbol("_stext"); stext && is_kernel_image_address(*stext))
            start = kernel_virt_to_phys(*stext, phys_base);
    start &= ~(kPageSize - 1);
    std::vector<uint64_t> banner_hits;
    std::array<std::byte, kPageSize> page;
    const uint64_t first_pfn = start / kPageSize;
    const uint64_t pages = options.scan_bytes / kPageSize;
    for (uint64_t pfn = first_pfn; pfn < first_pfn + pages; ++pfn) {
        budget.check_cancel();
        const std::byte* p = m.page(pfn);
        if (p == nullptr) continue;
        std::memcpy(page.data(), p, kPageSize);  // m's cache may be reused below
        if (info == nullptr && banner_hits.size() < 64) {
            const auto* text = reinterpret_cast<const char*>(page.data());
            const void* hit = memmem(text, kPageSize, kBannerPrefix.data(), kBannerPrefix.size());
            if (hit != nullptr)
                banner_hits.push_back(pfn * kPageSize +
                                      static_cast<uint64_t>(static_cast<const char*>(hit) - text));
        }
        for (size_t off = 0; off + 8 <= kPageSize; off += 8) {
            if (!index_head(page.data() + off)) continue;
            auto d = decode_at_index(m, budget, pfn * kPageSize + off);
            if (!d) continue;
            auto k = finish(std::move(*d), info);
            if (!k) continue;
            if (info == nullptr) {
                // Finish the banner search over the rest of the image window.
                for (uint64_t q = pfn + 1; q < first_pfn + pages && banner_hits.size() < 64; ++q) {
                    const std::byte* qp = m.page(q);
                    if (qp == nullptr) continue;
                    const void* hit = memmem(qp, kPageSize, kBannerPrefix.data(), kBannerPrefix.size());
                    if (hit != nullptr)
                        banner_hits.push_back(
                            q * kPageSize + static_cast<uint64_t>(static_cast<const std::byte*>(hit) - qp));
                }
                auto derived = derive_phys_base(m, k->table, banner_hits);
                if (derived) k->phys_base = *derived;
            }
            return k;
        }
    }
    return std::nullopt;
}

}  // namespace

std::optional<Kallsyms> find_kallsyms(const PageReader& reader, const Vmcoreinfo* info,
                                      const KallsymsOptions& options, KallsymsSearchStats* stats) {
    KallsymsSearchStats local;
    KallsymsSearchStats& st = stats ? *stats : local;
    st = KallsymsSearchStats{};
    PhysicalMemory m(reader);
    Budget budget(options, st);
    try {
        return search(m, budget, info, options);
    } catch (const WorkLimitReached&) {
        st.gave_up = true;
        return std::nullopt;
    }
}

std::optional<std::string> read_linux_banner(PhysicalMemory& memory, const Kallsyms& k) {
    auto banner = k.table.address("linux_banner");
    if (!banner || !is_kernel_image_address(*banner)) return std::nullopt;
    auto text = memory.c_string(kernel_virt_to_phys(*banner, k.phys_base), 1024);
    if (!text || !text->starts_with(kBannerPrefix)) return std::nullopt;
    return text;
}

}  // namespace xendump::kernel
