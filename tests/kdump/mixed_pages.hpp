// Pages of three kinds for the compact format's tests and fuzz seeds, by
// pfn: all zeros (pfn % 3 == 0), random bytes that no algorithm shrinks
// (pfn % 3 == 1) and text that every algorithm compresses (pfn % 3 == 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "xendump/kdump.hpp"
#include "xendump/page_source.hpp"

namespace xendump::test {

inline void fill_mixed_page(uint64_t pfn, std::byte* p) {
    if (pfn % 3 == 0) {
        std::memset(p, 0, 4096);
    } else if (pfn % 3 == 1) {
        std::mt19937_64 g(pfn);
        for (size_t k = 0; k < 4096; k += 8) {
            const uint64_t v = g();
            std::memcpy(p + k, &v, 8);
        }
    } else {
        const std::string line = "pfn " + std::to_string(pfn) + ": some kernel text\n";
        for (size_t k = 0; k < 4096; ++k) p[k] = std::byte(line[k % line.size()]);
    }
}

// Mixed pages at the given entries.
struct MixedSource : PageSource {
    std::vector<PageEntry> list;
    explicit MixedSource(std::vector<PageEntry> e) : list(std::move(e)) {}
    std::span<const PageEntry> entries() const override { return list; }
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> unreadable) override {
        for (size_t i = 0; i < count; ++i) {
            fill_mixed_page(list[first + i].pfn, out.data() + i * 4096);
            unreadable[i] = 0;
        }
    }
};

// A compact file's options: `compression` on `threads` threads.
inline KdumpOptions kdump_options(Compression compression, unsigned threads) {
    KdumpOptions o;
    o.compression = compression;
    o.write.threads = threads;
    return o;
}

}  // namespace xendump::test
