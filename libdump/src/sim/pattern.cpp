#include "sim/pattern.hpp"

#include <bit>
#include <cstring>

namespace xendump::sim {

// A dump of a 4 GiB pattern guest generates a million pages; with 64-bit
// vector multiplies (AVX-512DQ) the loop runs several times faster, so GCC
// builds one clone per x86 level and picks one at load time (ifunc). The
// clones are of a function of this file only: GCC gives a target_clones
// function's resolver the default visibility whatever -fvisibility says, so a
// clone of fill_pattern_page itself would be exported from libxendump.so.
// Not under ThreadSanitizer: the resolver, instrumented, runs while ld.so
// relocates the library, before TSan's runtime is set up, and crashes.
namespace {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
void fill(uint32_t domid, uint64_t pfn, std::byte* page) {
    const uint64_t base = (uint64_t{domid} << 52) ^ (pfn << 9);
    uint64_t words[512];
    for (unsigned i = 0; i < 512; ++i) {
        uint64_t w = splitmix64(base ^ i);
        if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
        words[i] = w;
    }
    std::memcpy(page, words, sizeof words);
}
}  // namespace

void fill_pattern_page(uint32_t domid, uint64_t pfn, std::byte* page) { fill(domid, pfn, page); }

}  // namespace xendump::sim
