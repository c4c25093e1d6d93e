// Built by the install test against the INSTALLED headers and pkg-config
// file only (not by meson): a minimal program of the kind other tools would
// write. Opens and verifies the dump named first and prints its page count,
// the first pfn and the first word of that page; given an old dump and an
// output name too, converts the old dump with the public conversion API and
// opens and verifies the result.
#include <xendump/convert.hpp>
#include <xendump/error.hpp>
#include <xendump/reader.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

// "verify ok" or the first finding; false when the file does not conform.
bool verify(const xendump::DumpReader& reader) {
    const auto findings = reader.verify();
    if (findings.empty()) {
        std::printf("verify ok\n");
        return true;
    }
    std::printf("verify: %zu findings, first: %s\n", findings.size(), findings.front().message.c_str());
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2 && argc != 4) {
        std::fprintf(stderr, "usage: %s DUMP [OLD-DUMP OUTPUT]\n", argv[0]);
        return 2;
    }
    try {
        auto reader = xendump::DumpReader::open(argv[1]);
        std::printf("pages %llu\n", static_cast<unsigned long long>(reader.nr_pages()));
        if (!verify(reader)) return 1;
        if (reader.nr_pages() == 0) return 0;
        const uint64_t pfn = reader.entries()[0].pfn;
        std::array<std::byte, 4096> page{};
        if (!reader.read_page_by_pfn(pfn, page)) return 1;
        uint64_t word = 0;
        std::memcpy(&word, page.data(), sizeof word);
        std::printf("first pfn %llu word %016llx\n", static_cast<unsigned long long>(pfn),
                    static_cast<unsigned long long>(word));
        if (argc == 2) return 0;

        std::printf("input format %s\n", std::string(xendump::to_string(xendump::sniff_format(argv[2]))).c_str());
        const xendump::ConversionPlan plan = xendump::convert_file(argv[2], argv[3]);
        std::printf("converted %s pages %llu\n", std::string(xendump::to_string(plan.format)).c_str(),
                    static_cast<unsigned long long>(plan.pages));
        auto converted = xendump::DumpReader::open(argv[3]);
        std::printf("output pages %llu\n", static_cast<unsigned long long>(converted.nr_pages()));
        if (!verify(converted)) return 1;
        const uint64_t first = converted.entries()[0].pfn;
        if (!converted.read_page_by_pfn(first, page)) return 1;
        std::memcpy(&word, page.data(), sizeof word);
        std::printf("output first pfn %llu word %016llx\n", static_cast<unsigned long long>(first),
                    static_cast<unsigned long long>(word));
        return 0;
    } catch (const xendump::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
