#include "kdump/codec.hpp"

#include <libdeflate.h>
#include <lz4.h>
#include <lzo/lzo1x.h>
#include <zlib.h>
#include <zstd.h>

#include <array>
#include <cstring>
#include <vector>

#include "kdump/format.hpp"
#include "xendump/error.hpp"

namespace xendump::kdump {

namespace {

// makedumpfile's levels: zstd 1, zlib Z_BEST_SPEED, lzo1x_1: fast enough to
// keep up with the guest's pages on a few cores.
constexpr int kZstdLevel = 1;

// zstd works in two steps. Every page is first compressed at level 1
// (~500 MB/s a core); a page that it shrinks to kZstdRetryFrom bytes or
// more is compressed again, and the smaller result is kept. Which second
// step depends on what level 1 made of it, as measured on a real 1 GiB
// guest's level-31 pages (44114 pages that are not zeros, makedumpfile -d 31
// of the Xen lab's HVM capture):
//  - below kZstdRetryFrom bytes (27509 pages, nearly empty or repetitive),
//    none: the lazy matcher would gain 172 KB there for a fifth of the
//    time of all the compression;
//  - below kZstdLazyBelow bytes (9001 pages), zstd's lazy matcher with
//    3-byte matches: 591 KB where the optimal parser gains 707 KB, in a
//    quarter of its time;
//  - from there up to a page (7094 pages of code and text, where zstd's
//    level 1 does worse than zlib), deflate (libdeflate level 6, stored in
//    zlib's format with the page flagged zlib): on code, byte-oriented
//    Huffman coding of short matches is what pays, and libdeflate finds
//    them at ~25 MB/s a core where zstd's optimal parser, the only zstd
//    setting that beats zlib there, runs at ~7 MB/s (measured on the
//    fixtures' guest: 3939 such pages, deflate 9.62 MB in 0.18 s of CPU,
//    zstd's optimal parser 9.48 MB in 0.63 s, zlib level 1 9.85 MB).
// Every kdump reader (crash, makedumpfile, libkdumpfile and so drgn)
// decompresses each page by its own descriptor's flag, so one file holds
// both (xen-dump-core(5), "Compact files"). A page that does not look
// compressible is not tried at all (looks_incompressible). The output does
// not depend on the thread count: each page is compressed on its own.
constexpr size_t kZstdRetryFrom = 512;
constexpr size_t kZstdLazyBelow = 2048;

ZSTD_CCtx* new_zstd_context() {
    ZSTD_CCtx* c = ZSTD_createCCtx();
    if (!c) throw Error("out of memory for a zstd context");
    // No frame checksum or dictionary id: readers call ZSTD_decompress.
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0);
    return c;
}

// The second step below kZstdLazyBelow: the lazy matcher, a window of one
// page, 3-byte matches.
ZSTD_CCtx* new_lazy_context() {
    ZSTD_CCtx* c = new_zstd_context();
    ZSTD_CCtx_setParameter(c, ZSTD_c_strategy, ZSTD_lazy);
    ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, 12);
    ZSTD_CCtx_setParameter(c, ZSTD_c_chainLog, 12);
    ZSTD_CCtx_setParameter(c, ZSTD_c_hashLog, 13);
    ZSTD_CCtx_setParameter(c, ZSTD_c_searchLog, 2);
    ZSTD_CCtx_setParameter(c, ZSTD_c_minMatch, 3);
    return c;
}

// The second step from kZstdLazyBelow: libdeflate's level 6 (its levels 7
// to 9 gain under 0.1 % on code pages, 10 to 12 under 1 % in 6 times the time).
constexpr int kDeflateLevel = 6;

void lzo_init_once() {
    static const int ok = lzo_init();
    if (ok != LZO_E_OK) throw Error("lzo_init failed");
}

}  // namespace

bool looks_incompressible(std::span<const std::byte> page) {
    // 4 bytes every 64 (a page's every cache line, which the hash reads
    // anyway): 256 bytes of a 4 KiB page. Random bytes show 162 different
    // values on average (256 (1 - 1/e)), never fewer than 140 in 65536
    // random pages; on the real guest's pages above, every page with 156 or
    // more did not shrink at level 1, and the pages with 150 to 155 shrank by
    // 12 KB in all (of 30 MB). Text, code, pointers and tables show far
    // fewer (the most compressible pages: under 100).
    constexpr size_t kSamples = 64, kBytesEach = 4;
    constexpr unsigned kRandomBelow = 150;
    if (page.size() < kSamples * kBytesEach) return false;
    const size_t step = page.size() / kSamples;
    std::array<uint8_t, 256> seen{};
    for (size_t at = 0; at + kBytesEach <= page.size(); at += step)
        for (size_t k = 0; k < kBytesEach; ++k) seen[std::to_integer<uint8_t>(page[at + k])] = 1;
    unsigned distinct = 0;
    for (uint8_t s : seen) distinct += s;
    return distinct >= kRandomBelow;
}

uint32_t flag_of(Compression c) {
    switch (c) {
    case Compression::none: return 0;
    case Compression::zstd: return kFlagZstd;
    case Compression::lz4: return kFlagLz4;
    case Compression::lzo: return kFlagLzo;
    case Compression::zlib: return kFlagZlib;
    }
    return 0;
}

bool known_page_flags(uint32_t flags) {
    return flags == 0 || flags == kFlagZstd || flags == kFlagLz4 || flags == kFlagLzo || flags == kFlagZlib;
}

size_t compress_bound(Compression c, size_t page) {
    switch (c) {
    case Compression::none: return page;
    case Compression::zstd: return ZSTD_compressBound(page);
    case Compression::lz4: return static_cast<size_t>(LZ4_compressBound(static_cast<int>(page)));
    case Compression::lzo: return page + page / 16 + 64 + 3;  // lzo1x worst case
    case Compression::zlib: return compressBound(page);
    }
    return page;
}

struct PageCompressor::State {
    ZSTD_CCtx* zstd = nullptr;             // level 1
    ZSTD_CCtx* zstd_lazy = nullptr;        // the second step below kZstdLazyBelow
    libdeflate_compressor* deflate = nullptr;  // the second step from there
    std::vector<unsigned char> retry;      // its output
    std::vector<unsigned char> lzo_work;
    ~State() {
        ZSTD_freeCCtx(zstd);
        ZSTD_freeCCtx(zstd_lazy);
        libdeflate_free_compressor(deflate);
    }
};

PageCompressor::PageCompressor(Compression c) : c_(c), state_(std::make_unique<State>()) {
    if (c == Compression::zstd) {
        state_->zstd = new_zstd_context();
        ZSTD_CCtx_setParameter(state_->zstd, ZSTD_c_compressionLevel, kZstdLevel);
        state_->zstd_lazy = new_lazy_context();
        state_->deflate = libdeflate_alloc_compressor(kDeflateLevel);
        if (!state_->deflate) throw Error("out of memory for a deflate compressor");
    } else if (c == Compression::lzo) {
        lzo_init_once();
        state_->lzo_work.resize(LZO1X_1_MEM_COMPRESS);
    }
}

PageCompressor::~PageCompressor() = default;

CompressedPage PageCompressor::compress(std::span<const std::byte> page, std::span<std::byte> out) {
    size_t n = 0;
    uint32_t flag = flag_of(c_);
    if (c_ == Compression::none || looks_incompressible(page)) return {};
    switch (c_) {
    case Compression::none: return {};
    case Compression::zstd: {
        n = ZSTD_compress2(state_->zstd, out.data(), out.size(), page.data(), page.size());
        if (ZSTD_isError(n)) throw Error(std::string("zstd: ") + ZSTD_getErrorName(n));
        if (n < kZstdRetryFrom || n >= page.size()) break;
        state_->retry.resize(out.size());
        size_t m = 0;
        uint32_t second = kFlagZstd;
        if (n < kZstdLazyBelow) {
            m = ZSTD_compress2(state_->zstd_lazy, state_->retry.data(), state_->retry.size(), page.data(),
                               page.size());
            if (ZSTD_isError(m)) throw Error(std::string("zstd: ") + ZSTD_getErrorName(m));
        } else {
            // 0: it did not fit in n bytes, no gain.
            m = libdeflate_zlib_compress(state_->deflate, page.data(), page.size(), state_->retry.data(), n);
            second = kFlagZlib;
        }
        if (m && m < n) {
            std::memcpy(out.data(), state_->retry.data(), m);
            n = m;
            flag = second;
        }
        break;
    }
    case Compression::lz4: {
        const int r = LZ4_compress_default(reinterpret_cast<const char*>(page.data()), reinterpret_cast<char*>(out.data()),
                                           static_cast<int>(page.size()), static_cast<int>(out.size()));
        if (r <= 0) return {};
        n = static_cast<size_t>(r);
        break;
    }
    case Compression::lzo: {
        lzo_uint len = out.size();
        if (lzo1x_1_compress(reinterpret_cast<const unsigned char*>(page.data()), page.size(),
                             reinterpret_cast<unsigned char*>(out.data()), &len, state_->lzo_work.data()) != LZO_E_OK)
            throw Error("lzo1x_1_compress failed");
        n = len;
        break;
    }
    case Compression::zlib: {
        uLongf len = out.size();
        if (compress2(reinterpret_cast<Bytef*>(out.data()), &len, reinterpret_cast<const Bytef*>(page.data()),
                      page.size(), Z_BEST_SPEED) != Z_OK)
            throw Error("zlib compress2 failed");
        n = len;
        break;
    }
    }
    if (n >= page.size()) return {};
    return {n, flag};
}

struct PageDecompressor::State {
    ZSTD_DCtx* zstd = nullptr;
    ~State() { ZSTD_freeDCtx(zstd); }
};

PageDecompressor::PageDecompressor() : state_(std::make_unique<State>()) {}
PageDecompressor::~PageDecompressor() = default;

std::string PageDecompressor::decompress(uint32_t flags, std::span<const std::byte> in, std::span<std::byte> out) {
    size_t got = 0;
    switch (flags) {
    case 0:
        if (in.size() != out.size()) return "a raw page of " + std::to_string(in.size()) + " bytes";
        std::copy(in.begin(), in.end(), out.begin());
        return {};
    case kFlagZstd: {
        if (!state_->zstd && !(state_->zstd = ZSTD_createDCtx())) throw Error("out of memory for a zstd context");
        got = ZSTD_decompressDCtx(state_->zstd, out.data(), out.size(), in.data(), in.size());
        if (ZSTD_isError(got)) return std::string("zstd: ") + ZSTD_getErrorName(got);
        break;
    }
    case kFlagLz4: {
        const int r = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
                                          static_cast<int>(in.size()), static_cast<int>(out.size()));
        if (r < 0) return "lz4: corrupt data";
        got = static_cast<size_t>(r);
        break;
    }
    case kFlagLzo: {
        lzo_init_once();
        lzo_uint len = out.size();
        const int r = lzo1x_decompress_safe(reinterpret_cast<const unsigned char*>(in.data()), in.size(),
                                            reinterpret_cast<unsigned char*>(out.data()), &len, nullptr);
        if (r != LZO_E_OK) return "lzo: corrupt data (" + std::to_string(r) + ")";
        got = len;
        break;
    }
    case kFlagZlib: {
        uLongf len = out.size();
        const int r = uncompress(reinterpret_cast<Bytef*>(out.data()), &len, reinterpret_cast<const Bytef*>(in.data()),
                                 in.size());
        if (r != Z_OK) return std::string("zlib: ") + zError(r);
        got = len;
        break;
    }
    default: return "unknown compression flags " + std::to_string(flags);
    }
    if (got != out.size()) return "decompressed to " + std::to_string(got) + " bytes, not a page";
    return {};
}

}  // namespace xendump::kdump

namespace xendump {

std::string_view to_string(Compression c) {
    switch (c) {
    case Compression::none: return "none";
    case Compression::zstd: return "zstd";
    case Compression::lz4: return "lz4";
    case Compression::lzo: return "lzo";
    case Compression::zlib: return "zlib";
    }
    return "?";
}

Compression compression_from_string(std::string_view s) {
    for (Compression c : {Compression::none, Compression::zstd, Compression::lz4, Compression::lzo, Compression::zlib})
        if (s == to_string(c)) return c;
    throw Error("unknown compression '" + std::string(s) + "' (none, zstd, lz4, lzo or zlib)");
}

}  // namespace xendump
