// libFuzzer target: DumpReader over arbitrary bytes taken for a compact
// (kdump) file: the input gets the "KDUMP   " signature, so every input
// reaches the kdump reader (header, sub header, bitmaps, descriptors, note
// area, decompression of every algorithm), then verify and page reads.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "xendump/error.hpp"
#include "xendump/reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = [] {
        const char* dir = std::getenv("TMPDIR");
        return std::string(dir && *dir ? dir : "/tmp") + "/xendump-fuzz-kdump." + std::to_string(getpid());
    }();
    std::vector<uint8_t> bytes(data, data + size);
    if (bytes.size() >= 8) std::memcpy(bytes.data(), "KDUMP   ", 8);
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
    std::fclose(f);
    try {
        auto r = xendump::DumpReader::open(path);
        (void)r.verify();
        (void)r.vcpus();
        (void)r.unreadable_pfns();
        std::vector<std::byte> page(4096);
        for (const auto& e : r.entries().first(std::min<size_t>(r.entries().size(), 64))) {
            (void)r.read_page_by_pfn(e.pfn, page);
            (void)r.read_page_by_gmfn(e.gmfn, page);
        }
        auto source = r.page_source();
        std::vector<uint8_t> unreadable(1);
        if (!source->entries().empty()) source->read_pages(0, 1, page, unreadable);
    } catch (const xendump::Error&) {
    }
    unlink(path.c_str());
    return 0;
}
