// The guest kernel's ORC tables: entry decoding (three versions) and the
// lookup of Linux arch/x86/kernel/unwind_orc.c (orc_find, __orc_find).
#include <charconv>
#include <cstring>

#include "xendump/kernel/backtrace.hpp"

namespace xendump::kernel {
namespace {

constexpr uint64_t kIpEntrySize = 4;       // s32, relative to its own address
constexpr uint64_t kOrcEntrySize = 6;
constexpr uint64_t kLookupBlockSize = 256; // LOOKUP_BLOCK_ORDER 8

template <class T>
std::optional<T> load(const VirtualReader& read, uint64_t vaddr) {
    T v;
    if (!read(vaddr, std::as_writable_bytes(std::span(&v, 1)))) return std::nullopt;
    return v;
}

}  // namespace

OrcVersion orc_version_for_release(std::string_view release) {
    unsigned major = 0, minor = 0;
    const char* p = release.data();
    const char* end = p + release.size();
    auto r = std::from_chars(p, end, major);
    if (r.ec != std::errc() || r.ptr == end || *r.ptr != '.') return OrcVersion::v3;
    r = std::from_chars(r.ptr + 1, end, minor);
    if (r.ec != std::errc()) return OrcVersion::v3;
    if (major < 6 || (major == 6 && minor < 3)) return OrcVersion::v1;
    if (major == 6 && minor == 3) return OrcVersion::v2;
    return OrcVersion::v3;
}

OrcEntry OrcEntry::decode(std::span<const std::byte, 6> raw, OrcVersion version) {
    OrcEntry e;
    std::memcpy(&e.sp_offset, raw.data(), 2);
    std::memcpy(&e.bp_offset, raw.data() + 2, 2);
    const unsigned flags = static_cast<unsigned>(raw[4]) | static_cast<unsigned>(raw[5]) << 8;
    e.sp_reg = flags & 0xf;
    e.bp_reg = (flags >> 4) & 0xf;
    if (version == OrcVersion::v3) {
        static constexpr OrcType kTypes[] = {OrcType::undefined, OrcType::end_of_stack, OrcType::call,
                                             OrcType::regs, OrcType::regs_partial};
        const unsigned type = (flags >> 8) & 7;
        e.type = type < std::size(kTypes) ? kTypes[type] : OrcType::undefined;
        e.signal = (flags & 0x800) != 0;
        return e;
    }
    static constexpr OrcType kTypes[] = {OrcType::call, OrcType::regs, OrcType::regs_partial, OrcType::undefined};
    e.type = kTypes[(flags >> 8) & 3];
    const bool end = (flags & (version == OrcVersion::v1 ? 0x400 : 0x800)) != 0;
    e.signal = version == OrcVersion::v2 ? (flags & 0x400) != 0
                                         : (e.type == OrcType::regs || e.type == OrcType::regs_partial);
    // Before 6.4 the end of a stack is an entry with the end bit and no sp
    // register (unwind_orc.c: "End-of-stack check for kernel threads").
    if (end && e.sp_reg == orc_reg::undefined) e.type = OrcType::end_of_stack;
    return e;
}

std::optional<OrcTable> OrcTable::locate(const SymbolTable& symbols, OrcVersion version) {
    const auto ip_start = symbols.address("__start_orc_unwind_ip");
    const auto ip_stop = symbols.address("__stop_orc_unwind_ip");
    const auto start = symbols.address("__start_orc_unwind");
    if (!ip_start || !ip_stop || !start || *ip_stop <= *ip_start) return std::nullopt;
    const uint64_t bytes = *ip_stop - *ip_start;
    if (bytes % kIpEntrySize != 0 || bytes / kIpEntrySize > kMaxEntries) return std::nullopt;
    OrcTable t;
    t.ip_table_ = *ip_start;
    t.entry_table_ = *start;
    t.count_ = bytes / kIpEntrySize;
    t.version_ = version;
    // Both tables have one entry per ip (the stop symbol, when there, must agree).
    if (auto stop = symbols.address("__stop_orc_unwind");
        stop && (*stop < *start || *stop - *start != t.count_ * kOrcEntrySize))
        return std::nullopt;
    const auto lookup = symbols.address("orc_lookup");
    const auto blocks = symbols.address("lookup_num_blocks");
    const auto stext = symbols.address("_stext");
    const auto etext = symbols.address("_etext");
    if (lookup && blocks && stext && etext && *stext < *etext) {
        t.lookup_ = *lookup;
        t.lookup_num_blocks_at_ = *blocks;
        t.text_start_ = *stext;
        t.text_end_ = *etext;
    }
    return t;
}

std::optional<uint64_t> OrcTable::ip_at(uint64_t index, const VirtualReader& read) const {
    const uint64_t at = ip_table_ + index * kIpEntrySize;
    auto rel = load<int32_t>(read, at);
    if (!rel) return std::nullopt;
    return at + static_cast<uint64_t>(static_cast<int64_t>(*rel));
}

std::optional<OrcEntry> OrcTable::search(uint64_t first, uint64_t last, uint64_t ip, const VirtualReader& read) const {
    // The rightmost entry in [first, last] whose ip <= `ip` (later duplicates
    // win over the weak section terminators, as in __orc_find).
    std::optional<uint64_t> found;
    uint64_t lo = first, hi = last + 1;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        auto at = ip_at(mid, read);
        if (!at) return std::nullopt;
        if (*at <= ip) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (!found) return std::nullopt;
    std::array<std::byte, kOrcEntrySize> raw;
    if (!read(entry_table_ + *found * kOrcEntrySize, raw)) return std::nullopt;
    return OrcEntry::decode(std::span<const std::byte, 6>(raw), version_);
}

std::optional<OrcEntry> OrcTable::find(uint64_t ip, const VirtualReader& read) const {
    if (count_ == 0) return std::nullopt;
    if (lookup_ && ip >= text_start_ && ip < text_end_) {
        // orc_lookup[idx] .. orc_lookup[idx + 1] + 1 bound the entries of the
        // 256 bytes of text holding ip; values that do not fit the table are
        // ignored (the whole table is searched instead).
        const uint64_t idx = (ip - text_start_) / kLookupBlockSize;
        const auto blocks = load<uint32_t>(read, lookup_num_blocks_at_);
        if (blocks && *blocks > 1 && idx < *blocks - 1) {
            const auto start = load<uint32_t>(read, lookup_ + idx * 4);
            const auto stop = load<uint32_t>(read, lookup_ + (idx + 1) * 4);
            if (start && stop && *start <= *stop && *stop < count_) {
                if (auto e = search(*start, *stop, ip, read)) return e;
            }
        }
    }
    return search(0, count_ - 1, ip, read);
}

}  // namespace xendump::kernel
