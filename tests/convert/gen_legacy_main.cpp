// gen-legacy DIR [NR_PFNS]: one legacy xc_core file per variant and tool
// width, named VARIANT-toolsWIDTH.core (for fuzz seeds and manual checks).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "legacy_gen.hpp"

int main(int argc, char** argv) {
    namespace gen = xendump::test::legacy_gen;
    if (argc < 2) {
        std::fprintf(stderr, "usage: gen-legacy DIR [NR_PFNS]\n");
        return 2;
    }
    std::filesystem::path dir = argv[1];
    uint64_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 700;
    for (unsigned w : {4u, 8u})
        for (auto v : {gen::Variant::pv_page_list, gen::Variant::hvm_pfn_order, gen::Variant::hvm_page_list,
                       gen::Variant::pv_pfn_order, gen::Variant::ocaml_damaged}) {
            bool pv = v == gen::Variant::pv_page_list || v == gen::Variant::pv_pfn_order;
            auto g = gen::make_guest({.width = w, .nr_pfns = n, .seed = w, .hole_pfns = {}, .p2m_tree = pv});
            auto bytes = gen::make_file(g, {.variant = v, .tool_width = w});
            gen::write_bytes(dir / (std::string(gen::to_string(v)) + "-tools" + std::to_string(w * 8) + ".core"), bytes);
        }
    return 0;
}
