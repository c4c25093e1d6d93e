// Writes the reader fuzz seeds (fuzz/corpus/reader) into a directory: small
// v1 dumps with and without digests, in the trailer layout of the
// specification as first published too (issue 32.4: spec_writer, with and
// without unreadable pages, one without a trailer section), an xl dump-core
// file, and the hostile xl file of issue 16.8 (2^40 vcpus, .xen_prstatus
// sh_entsize 1).
//   usage: gen-reader-seeds DIR
#include <cstdio>
#include <string>

#include "../convert/xl_elf_gen.hpp"
#include "hand_built_dump.hpp"
#include "spec_writer.hpp"
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

    // The first specification's trailer (no padding note), one seed per kind of guest.
    struct FirstSpec { const char* name; compat::Guest guest; bool digests, unreadable; };
    for (const FirstSpec& f : {FirstSpec{"v1-first-spec-pv64-unreadable.core", compat::Guest::pv64, true, true},
                               FirstSpec{"v1-first-spec-pv32.core", compat::Guest::pv32, true, false},
                               FirstSpec{"v1-first-spec-hvm-no-trailer.core", compat::Guest::hvm, false, false},
                               FirstSpec{"v1-first-spec-pvh-unreadable-no-digests.core", compat::Guest::pvh, false, true}}) {
        compat::SpecFile s;
        s.guest = f.guest;
        s.trailer = compat::Trailer::first_spec;
        s.digests = f.digests;
        s.entries = compat::sample_entries(16, f.guest);
        if (f.unreadable) s.unreadable = {s.entries[2].pfn, s.entries[9].pfn};
        s.nr_vcpus = 1;
        compat::write_spec_file(s, dir / f.name);
    }

    xl_elf_gen::XlSpec xl;
    for (uint64_t p = 0; p < 16; ++p) xl.pfns.push_back(p);
    write_bytes(dir / "xl-pv.core", xl_elf_gen::make_xl_core(xl));
    write_bytes(dir / "xl-vcpu-amplification.core", xl_vcpu_amplification(16));
    return 0;
}
