// One page in, one page out: the compression algorithms of the kdump file.
// A PageCompressor holds one thread's state (contexts, work memory); the
// output for a page depends only on the page and the algorithm, so pages
// compressed on any thread give the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "xendump/kdump.hpp"

namespace xendump::kdump {

// The PageDesc flag of an algorithm (0 for none).
uint32_t flag_of(Compression c);
// Room a compressed page may need before it is known to be too large.
size_t compress_bound(Compression c, size_t page_size);

// True when a page's bytes look random (compressed, encrypted, random data):
// a sample of 256 of its bytes, spread over the page, holds about as many
// different values as random bytes do. PageCompressor stores such a page raw
// without trying: on such pages zstd level 1 runs at ~0.5 GB/s a core to
// find nothing, the probe at ~15 GB/s. A page of random bytes that repeat
// within the page (which would shrink) is stored raw too; real guests have
// few (see codec.cpp).
bool looks_incompressible(std::span<const std::byte> page);

// A compressed page: `size` bytes of the output, to be stored with the
// PageDesc flag `flag`; size 0: store the page raw (flag 0).
struct CompressedPage {
    size_t size = 0;
    uint32_t flag = 0;
};

class PageCompressor {
public:
    explicit PageCompressor(Compression c);
    ~PageCompressor();
    PageCompressor(const PageCompressor&) = delete;
    PageCompressor& operator=(const PageCompressor&) = delete;

    // Compresses `page` into `out` (at least compress_bound() bytes).
    // Returns the compressed size and its flag: flag_of() the algorithm, but
    // for zstd a page of code or text may come out in zlib's format where
    // deflate does better (kFlagZlib; codec.cpp says which pages). Size 0
    // when it is not smaller than the page or looks_incompressible() (the
    // page is then stored raw).
    CompressedPage compress(std::span<const std::byte> page, std::span<std::byte> out);

private:
    struct State;
    Compression c_;
    std::unique_ptr<State> state_;
};

// Decompresses a page stored with `flags` into `out` (exactly out.size()
// bytes must come out). Returns an empty string, or what went wrong.
class PageDecompressor {
public:
    PageDecompressor();
    ~PageDecompressor();
    PageDecompressor(const PageDecompressor&) = delete;
    PageDecompressor& operator=(const PageDecompressor&) = delete;
    std::string decompress(uint32_t flags, std::span<const std::byte> in, std::span<std::byte> out);

private:
    struct State;
    std::unique_ptr<State> state_;
};

// The algorithm named by a page's flags: kFlag* with one bit set, or 0 (raw).
// Returns false for flags that name no algorithm this reader knows.
bool known_page_flags(uint32_t flags);

}  // namespace xendump::kdump
