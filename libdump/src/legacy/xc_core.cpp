#include "legacy/xc_core.hpp"

#include <cstring>

#include "legacy/hex.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {
namespace {

using util::kPage;
constexpr size_t kContext32 = 2800;  // sizeof(vcpu_guest_context) with 32-bit tools
constexpr size_t kContext64 = 5168;  // ... with 64-bit tools

uint64_t round_up_page(uint64_t v) { return (v + kPage - 1) & ~(kPage - 1); }

bool known_context_size(uint64_t s) { return s == kContext32 || s == kContext64; }

// Does an index of `n` entries of `entry` bytes at `index_at` end where the
// pages begin (exactly, or rounded up to a page as Xen's writer did)?
bool index_fits(uint64_t index_at, uint64_t n, uint64_t entry, uint64_t pages_at) {
    uint64_t end = index_at + n * entry;  // u32 * 8 + u32: no overflow in 64 bits
    return end == pages_at || round_up_page(end) == pages_at;
}

Error field_error(const ByteSource& src, const char* field, uint64_t off, const std::string& why) {
    return Error(std::string("xc_core header: ") + field + " " + why, src.name(), off);
}

}  // namespace

bool looks_like_xc_core(std::span<const std::byte> first) {
    if (first.size() < 4) return false;
    uint32_t magic;
    std::memcpy(&magic, first.data(), 4);
    return magic == kXcCoreMagic || magic == kXcCoreMagicHvm;
}

uint64_t IndexTable::operator[](uint64_t i) const {
    if (cache_.empty() || i < cache_first_ || i - cache_first_ >= cache_.size()) {
        cache_first_ = i - std::min<uint64_t>(i, kWindow / 2);  // around i: reads go both ways
        cache_.resize(static_cast<size_t>(std::min<uint64_t>(kWindow, count_ - cache_first_)));
        read(cache_first_, cache_);
    }
    return cache_[static_cast<size_t>(i - cache_first_)];
}

void IndexTable::read(uint64_t first, std::span<uint64_t> out) const {
    if (first > count_ || out.size() > count_ - first)
        throw Error("index entries " + std::to_string(first) + "+" + std::to_string(out.size()) + " are past the " +
                        std::to_string(count_) + " entries",
                    src_->name(), offset_of(first));
    src_->read(offset_of(first), std::as_writable_bytes(out).first(out.size() * entry_size_), "index");
    if (entry_size_ == 8) return;
    // Widen in place from the end: entry k's 4 bytes sit at 4k, its u64 at 8k.
    const std::byte* raw = reinterpret_cast<const std::byte*>(out.data());
    for (size_t k = out.size(); k-- > 0;) {
        uint32_t e;
        std::memcpy(&e, raw + k * 4, 4);
        out[k] = e == 0xFFFFFFFFu ? kInvalidEntry : e;
    }
}

XcCoreFile parse_xc_core(const ByteSource& src) {
    XcCoreFile f;
    if (src.size() < kXcCoreHeaderSize)
        throw Error("file too short for the 24-byte xc_core header (size " + std::to_string(src.size()) + ")",
                    src.name(), 0);
    std::byte raw[kXcCoreHeaderSize];
    src.read(0, raw, "xc_core header");
    std::memcpy(&f.header, raw, sizeof f.header);
    const XcCoreHeader& h = f.header;

    if (h.magic != kXcCoreMagic && h.magic != kXcCoreMagicHvm)
        throw field_error(src, "xch_magic", header_field::magic,
                          hex(h.magic) + " is neither 0xf00febed nor 0xf00febee");
    if (h.nr_vcpus == 0)
        throw field_error(src, "xch_nr_vcpus", header_field::nr_vcpus, "is 0: no vcpu context was stored");
    if (h.ctxt_offset < kXcCoreHeaderSize && h.index_offset < kXcCoreHeaderSize)
        throw field_error(src, "xch_ctxt_offset", header_field::ctxt_offset,
                          hex(h.ctxt_offset) + " points inside the header");

    uint64_t ctx_span = 0;
    if (h.index_offset < h.ctxt_offset) {
        // Xen's OCaml writer swapped the two offsets and wrote no index: the
        // contexts really sit at xch_index_offset (24) and end at
        // xch_ctxt_offset. Recognise exactly that shape; anything else with
        // the offsets reversed is garbage.
        ctx_span = uint64_t{h.ctxt_offset} - h.index_offset;
        if (h.index_offset != kXcCoreHeaderSize || ctx_span % h.nr_vcpus != 0 ||
            !known_context_size(ctx_span / h.nr_vcpus))
            throw field_error(src, "xch_index_offset", header_field::index_offset,
                              hex(h.index_offset) + " is below xch_ctxt_offset " + hex(h.ctxt_offset) +
                                  " and the gap is not nr_vcpus contexts of 2800 or 5168 bytes");
        if (h.pages_offset < h.ctxt_offset || h.pages_offset % kPage != 0)
            throw field_error(src, "xch_pages_offset", header_field::pages_offset,
                              hex(h.pages_offset) + " is not a page boundary after the contexts");
        f.damage = Damage::ocaml_swapped_no_index;
        f.contexts_at = h.index_offset;
        f.context_size = ctx_span / h.nr_vcpus;
        f.entry_size = 0;
    } else {
        if (h.ctxt_offset < kXcCoreHeaderSize)
            throw field_error(src, "xch_ctxt_offset", header_field::ctxt_offset,
                              hex(h.ctxt_offset) + " points inside the header");
        ctx_span = uint64_t{h.index_offset} - h.ctxt_offset;
        if (ctx_span % h.nr_vcpus != 0 || !known_context_size(ctx_span / h.nr_vcpus))
            throw field_error(src, "xch_index_offset", header_field::index_offset,
                              hex(h.index_offset) + ": the contexts (xch_index_offset - xch_ctxt_offset = " +
                                  std::to_string(ctx_span) + " bytes for " + std::to_string(h.nr_vcpus) +
                                  " vcpus) are not 2800 (32-bit tools) or 5168 (64-bit tools) bytes each");
        f.contexts_at = h.ctxt_offset;
        f.context_size = ctx_span / h.nr_vcpus;
        if (h.pages_offset < h.index_offset)
            throw field_error(src, "xch_pages_offset", header_field::pages_offset,
                              hex(h.pages_offset) + " is below xch_index_offset " + hex(h.index_offset));
        bool fits4 = index_fits(h.index_offset, h.nr_pages, 4, h.pages_offset);
        bool fits8 = index_fits(h.index_offset, h.nr_pages, 8, h.pages_offset);
        size_t by_context = f.context_size == kContext64 ? 8 : 4;
        if (fits4 && fits8)
            f.entry_size = by_context;  // small index: both fit the padding, the context decides
        else if (fits8)
            f.entry_size = 8;  // 64-bit tools, or the development window of 32-bit tools with 8-byte entries
        else if (fits4) {
            if (by_context == 8)
                throw field_error(src, "xch_pages_offset", header_field::pages_offset,
                                  hex(h.pages_offset) + " leaves room for 4-byte index entries but the " +
                                      "5168-byte contexts say 64-bit tools (8-byte entries): the two disagree");
            f.entry_size = 4;
        } else
            throw field_error(src, "xch_pages_offset", header_field::pages_offset,
                              hex(h.pages_offset) + " does not follow an index of " + std::to_string(h.nr_pages) +
                                  " entries of 4 or 8 bytes at " + hex(h.index_offset));
    }
    f.guest_width = f.context_size == kContext64 ? 8 : 4;
    f.pages_offset = h.pages_offset;
    if (f.pages_offset % kPage != 0)
        throw field_error(src, "xch_pages_offset", header_field::pages_offset,
                          hex(h.pages_offset) + " is not page-aligned");

    // Every page must be in the file (truncated dumps are common: a full disk).
    uint64_t pages_bytes = uint64_t{h.nr_pages} * kPage;
    if (f.pages_offset > src.size() || src.size() - f.pages_offset < pages_bytes) {
        uint64_t have = f.pages_offset > src.size() ? 0 : (src.size() - f.pages_offset) / kPage;
        throw Error("truncated: xch_nr_pages is " + std::to_string(h.nr_pages) + " but only " +
                        std::to_string(have) + " whole pages follow xch_pages_offset " + hex(f.pages_offset) +
                        " (file size " + hex(src.size()) + ")",
                    src.name(), f.pages_offset + have * kPage);
    }

    f.contexts.resize(h.nr_vcpus);
    for (uint32_t v = 0; v < h.nr_vcpus; ++v) {
        f.contexts[v].resize(f.context_size);
        src.read(f.contexts_at + uint64_t{v} * f.context_size, f.contexts[v], "vcpu context");
    }

    if (f.entry_size != 0) f.index = IndexTable(src, h.index_offset, h.nr_pages, f.entry_size);
    return f;
}

}  // namespace xendump::legacy
