// bench-gen-legacy FILE NR_PAGES: a legacy xc_core file of a 64-bit PV guest
// in page-list order (spec legacy-formats.md §A.1, frames shuffled, the p2m
// frame-list tree inside the guest's memory), the input of benchmark #6. Uses
// the tests' generator, so the benchmark converts what the tests check.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "legacy_gen.hpp"

int main(int argc, char** argv) {
    namespace gen = xendump::test::legacy_gen;
    if (argc != 3) {
        std::fprintf(stderr, "usage: bench-gen-legacy FILE NR_PAGES\n");
        return 2;
    }
    try {
        const std::filesystem::path path = argv[1];
        const uint64_t n = std::strtoull(argv[2], nullptr, 0);
        auto guest = gen::make_guest({.width = 8, .nr_pfns = n, .seed = 1, .hole_pfns = {}, .p2m_tree = true});
        auto bytes = gen::make_file(guest, {.variant = gen::Variant::pv_page_list, .tool_width = 8});
        guest = {};
        const std::filesystem::path tmp = path.string() + ".part";
        gen::write_bytes(tmp, bytes);
        std::filesystem::rename(tmp, path);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench-gen-legacy: %s\n", e.what());
        return 1;
    }
    return 0;
}
