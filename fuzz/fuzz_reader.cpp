// libFuzzer target: DumpReader over arbitrary bytes. The reader works on a
// file, so each input is written to a temporary file, opened and verified.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "xendump/error.hpp"
#include "xendump/reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = [] {
        const char* dir = std::getenv("TMPDIR");
        return std::string(dir && *dir ? dir : "/tmp") + "/xendump-fuzz-reader." + std::to_string(getpid());
    }();
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
    try {
        auto r = xendump::DumpReader::open(path);
        (void)r.verify();
        xendump::VerifyOptions structure_only;
        structure_only.digests = false;
        (void)r.verify_report(structure_only);
        (void)r.vcpus();
        (void)r.unreadable_pfns();
        (void)r.kernel_image_mapping();
        std::vector<std::byte> page(4096);
        for (const auto& e : r.entries().first(std::min<size_t>(r.entries().size(), 4))) {
            (void)r.read_page_by_pfn(e.pfn, page);
            (void)r.read_page_by_gmfn(e.gmfn, page);
        }
    } catch (const xendump::Error&) {
    }
    unlink(path.c_str());
    return 0;
}
