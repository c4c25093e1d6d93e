// bench-gen-legacy FILE NR_PAGES [allocation|shuffled|sparse]: a legacy xc_core
// file of a 64-bit PV guest in page-list order (doc/legacy-formats.md 1.1,
// the p2m frame-list tree inside the guest's memory), the input of benchmark
// #6: "allocation" (the default) is the order Xen's page list has (see
// legacy_gen::FileSpec::allocation_order), "shuffled" a random order, the
// worst case, "sparse" a large guest written straight to disk with its zero
// pages as holes (legacy_gen::write_sparse_pv_page_list: 256 GiB in seconds).
// Uses the tests' generator, so the benchmark converts what the tests check.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "legacy_gen.hpp"

int main(int argc, char** argv) {
    namespace gen = xendump::test::legacy_gen;
    const std::string order = argc == 4 ? argv[3] : "allocation";
    if ((argc != 3 && argc != 4) || (order != "allocation" && order != "shuffled" && order != "sparse")) {
        std::fprintf(stderr, "usage: bench-gen-legacy FILE NR_PAGES [allocation|shuffled|sparse]\n");
        return 2;
    }
    try {
        const std::filesystem::path path = argv[1];
        const uint64_t n = std::strtoull(argv[2], nullptr, 0);
        const std::filesystem::path tmp = path.string() + ".part";
        if (order == "sparse") {
            gen::write_sparse_pv_page_list(tmp, n);
            std::filesystem::rename(tmp, path);
            return 0;
        }
        auto guest = gen::make_guest({.width = 8, .nr_pfns = n, .seed = 1, .hole_pfns = {}, .p2m_tree = true});
        auto bytes = gen::make_file(guest, {.variant = gen::Variant::pv_page_list, .tool_width = 8, .allocation_order = order == "allocation"});
        guest = {};
        gen::write_bytes(tmp, bytes);
        std::filesystem::rename(tmp, path);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench-gen-legacy: %s\n", e.what());
        return 1;
    }
    return 0;
}
