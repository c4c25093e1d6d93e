// Writes the kdump reader's fuzz seeds (fuzz/corpus/kdump) into a
// directory: small compact files of every page compression, a PV guest's
// (with its NT_XEN_P2M table) and one without digests. The corpus also
// keeps hvm-zstd-before-head-note.kdump, written before NT_XEN_KDUMP_HEAD
// (issue 32): not made here, kept as it was. With READER_DIR, the same
// HVM and PV files as makedumpfile's flattened stream (write_kdump_flattened)
// into it: DumpReader's seeds (fuzz/corpus/reader), which reach the
// flattened reader (reader/flattened_image.hpp) before the kdump one.
//   usage: gen-kdump-seeds DIR [READER_DIR]
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "xendump/kdump.hpp"
#include "mixed_pages.hpp"

using namespace xendump;

namespace {

// Mixed pages at pfns with holes; a PV guest's frames are not in pfn order.
std::vector<PageEntry> seed_entries(bool pv) {
    std::vector<PageEntry> list;
    for (uint64_t pfn : {0, 1, 2, 5, 6, 9, 40}) list.push_back({pfn, pv ? 0x2000 - 3 * pfn : pfn});
    return list;
}

DumpSpec seed_spec(format::GuestType type) {
    DumpSpec spec;
    spec.type = type;
    spec.domain.set(keys::kDomid, "4");
    spec.domain.set(keys::kName, "seed");
    spec.domain.set(keys::kType, std::string(format::to_string(type)));
    spec.vcpus.push_back({0, std::vector<std::byte>(format::kVcpuContextSize64, std::byte{1})});
    spec.vmcoreinfo = "OSRELEASE=6.1.0\nPAGESIZE=4096\nSYMBOL(swapper_pg_dir)=ffffffff8260a000\n";
    return spec;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2 && argc != 3) {
        std::fprintf(stderr, "usage: gen-kdump-seeds DIR [READER_DIR]\n");
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    for (Compression c : {Compression::zstd, Compression::lz4, Compression::lzo, Compression::zlib, Compression::none}) {
        test::MixedSource src(seed_entries(false));
        write_kdump_file(dir / ("hvm-" + std::string(to_string(c)) + ".kdump"), seed_spec(format::GuestType::hvm), src,
                         test::kdump_options(c, 1));
    }
    test::MixedSource pv(seed_entries(true));
    write_kdump_file(dir / "pv-zstd.kdump", seed_spec(format::GuestType::pv), pv, test::kdump_options(Compression::zstd, 1));
    test::MixedSource plain(seed_entries(false));
    KdumpOptions o;
    o.write.digests = false;
    write_kdump_file(dir / "hvm-no-digests.kdump", seed_spec(format::GuestType::pvh), plain, o);
    if (argc == 3) {
        const std::filesystem::path reader_dir = argv[2];
        for (bool pv : {false, true}) {
            const std::filesystem::path p = reader_dir / (pv ? "pv-zstd.flat" : "hvm-zstd.flat");
            const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0) {
                std::perror(p.c_str());
                return 1;
            }
            test::MixedSource src(seed_entries(pv));
            write_kdump_flattened(fd, seed_spec(pv ? format::GuestType::pv : format::GuestType::hvm), src,
                                  test::kdump_options(Compression::zstd, 1));
            ::close(fd);
        }
    }
    return 0;
}
