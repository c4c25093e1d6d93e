// The legacy `xc_core` file of Xen <= 3.0.4 (doc/legacy-formats.md 1): a
// 24-byte header of six u32, the vcpu contexts, an index of nr_pages entries
// and the pages. Everything is in the width of the dom0 tools that wrote it,
// which we detect from the offsets.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "legacy/byte_source.hpp"

namespace xendump::legacy {

inline constexpr uint32_t kXcCoreMagic = 0xF00FEBED;     // PV (and HVM before 3.0.4)
inline constexpr uint32_t kXcCoreMagicHvm = 0xF00FEBEE;  // HVM, Xen 3.0.4
inline constexpr uint64_t kXcCoreHeaderSize = 24;
// An index entry of all ones at tool width, widened to 64 bits.
inline constexpr uint64_t kInvalidEntry = std::numeric_limits<uint64_t>::max();

// Field offsets inside the header, for error messages.
namespace header_field {
inline constexpr uint64_t magic = 0, nr_vcpus = 4, nr_pages = 8, ctxt_offset = 12,
                          index_offset = 16, pages_offset = 20;
}

struct XcCoreHeader {
    uint32_t magic;
    uint32_t nr_vcpus;
    uint32_t nr_pages;
    uint32_t ctxt_offset;
    uint32_t index_offset;
    uint32_t pages_offset;
};
static_assert(sizeof(XcCoreHeader) == kXcCoreHeaderSize);

// The index (nr_pages entries of entry_size bytes at index_offset), read from
// the file a window at a time, never held whole (issue 19: 8 bytes a page
// would grow with the guest). Entries are widened to u64, ~0 at tool width
// to kInvalidEntry. operator[] keeps one window cached: one thread at a
// time; read() and for_each() share nothing.
class IndexTable {
public:
    static constexpr size_t kWindow = 8192;  // entries per read

    IndexTable() = default;
    IndexTable(const ByteSource& src, uint64_t offset, uint64_t count, size_t entry_size)
        : src_(&src), offset_(offset), count_(count), entry_size_(entry_size) {}
    uint64_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    // File offset of entry `i`, for messages.
    uint64_t offset_of(uint64_t i) const { return offset_ + i * entry_size_; }
    const std::string& name() const { return src_->name(); }
    uint64_t operator[](uint64_t i) const;
    // Entries [first, first + out.size()).
    void read(uint64_t first, std::span<uint64_t> out) const;
    // f(slot, entry) for the slots [from, to) in order, a window at a time.
    template <class F>
    void for_each(F&& f, uint64_t from = 0, uint64_t to = UINT64_MAX) const {
        to = std::min(to, count_);
        std::vector<uint64_t> w;
        for (uint64_t at = from; at < to; at += w.size()) {
            w.resize(static_cast<size_t>(std::min<uint64_t>(kWindow, to - at)));
            read(at, w);
            for (size_t k = 0; k < w.size(); ++k) f(at + k, w[k]);
        }
    }

private:
    const ByteSource* src_ = nullptr;
    uint64_t offset_ = 0, count_ = 0;
    size_t entry_size_ = 0;
    mutable std::vector<uint64_t> cache_;
    mutable uint64_t cache_first_ = 0;
};

enum class Damage {
    none,
    // Xen's old OCaml writer: xch_ctxt_offset and xch_index_offset swapped and
    // no index written at all.
    ocaml_swapped_no_index,
};

struct XcCoreFile {
    XcCoreHeader header{};
    size_t context_size = 0;   // 2800 (32-bit tools) or 5168 (64-bit tools)
    size_t entry_size = 0;     // 4 or 8
    unsigned guest_width = 0;  // 4 or 8: the tools' width (Xen <= 3.0.4 had no compat guests)
    Damage damage = Damage::none;
    uint64_t contexts_at = 0;  // real file offset of the contexts (differs when damaged)
    std::vector<std::vector<std::byte>> contexts;  // nr_vcpus, context_size each
    IndexTable index;  // nr_pages entries widened to u64 (~0 -> kInvalidEntry); empty when damaged
    uint64_t pages_offset = 0;

    bool is_hvm_magic() const { return header.magic == kXcCoreMagicHvm; }
    uint64_t nr_pages() const { return header.nr_pages; }
    uint64_t page_offset(uint64_t slot) const { return pages_offset + slot * 4096; }
};

// True when the first bytes carry an xc_core magic (format sniffing).
bool looks_like_xc_core(std::span<const std::byte> first_bytes);

// Parses and checks everything but the page contents. Throws Error naming the
// file, the field and its offset for every inconsistency. The result's index
// reads through `src`, which must outlive it.
XcCoreFile parse_xc_core(const ByteSource& src);

}  // namespace xendump::legacy
