// Writes the reader fuzz seeds (fuzz/corpus/reader) into a directory: small
// v1 dumps with and without digests, an xl dump-core file, and the hostile
// xl file of issue 16.8 (2^40 vcpus, .xen_prstatus sh_entsize 1).
//   usage: gen-reader-seeds DIR
#include <cstdio>
#include <string>

#include "../convert/xl_elf_gen.hpp"
#include "hand_built_dump.hpp"
#include "hostile_files.hpp"

using namespace xendump;
using namespace xendump::test;

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: gen-reader-seeds DIR\n");
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    HandBuildSpec pv;
    pv.entries = sample_entries(20, true);
    pv.nr_vcpus = 1;
    write_bytes(dir / "v1-pv-digests.core", build_hand_dump(pv).bytes);
    HandBuildSpec hvm = pv;
    hvm.type = format::GuestType::hvm;
    hvm.entries = sample_entries(20, false);
    hvm.digests = false;
    write_bytes(dir / "v1-hvm-no-digests.core", build_hand_dump(hvm).bytes);

    xl_elf_gen::XlSpec xl;
    for (uint64_t p = 0; p < 16; ++p) xl.pfns.push_back(p);
    write_bytes(dir / "xl-pv.core", xl_elf_gen::make_xl_core(xl));
    write_bytes(dir / "xl-vcpu-amplification.core", xl_vcpu_amplification(16));
    return 0;
}
