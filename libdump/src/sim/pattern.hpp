// The simulated host's "pattern" memory fill (simulated-host.md, "The
// pattern"): page p of domain d holds 512 little-endian u64 words,
// word i = splitmix64((d << 52) ^ (p << 9) ^ i). Pages are generated on the
// fly, so a 16 GiB guest costs no disk.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xendump::sim {

inline constexpr uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

inline uint64_t pattern_word(uint32_t domid, uint64_t pfn, unsigned index) {
    return splitmix64((uint64_t{domid} << 52) ^ (pfn << 9) ^ index);
}

// Writes the 4096-byte pattern page of (domid, pfn) to `page`. Reading a
// pattern guest is generating it, so this is built for speed (pattern.cpp).
void fill_pattern_page(uint32_t domid, uint64_t pfn, std::byte* page);

}  // namespace xendump::sim
