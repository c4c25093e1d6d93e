// Built by the install test against the INSTALLED headers and pkg-config
// file only (not by meson): a minimal reader program of the kind other tools
// would write. Prints the page count, the first pfn and the first word of
// that page of the dump named on the command line.
#include <xendump/error.hpp>
#include <xendump/reader.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DUMP\n", argv[0]);
        return 2;
    }
    try {
        auto reader = xendump::DumpReader::open(argv[1]);
        std::printf("pages %llu\n", static_cast<unsigned long long>(reader.nr_pages()));
        if (reader.nr_pages() == 0) return 0;
        const uint64_t pfn = reader.entries()[0].pfn;
        std::array<std::byte, 4096> page{};
        if (!reader.read_page_by_pfn(pfn, page)) return 1;
        uint64_t word = 0;
        std::memcpy(&word, page.data(), sizeof word);
        std::printf("first pfn %llu word %016llx\n", static_cast<unsigned long long>(pfn),
                    static_cast<unsigned long long>(word));
        return 0;
    } catch (const xendump::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
