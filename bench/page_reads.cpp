// Benchmark 8: random page reads by pfn through libdump against pread() of
// the same pages at offsets computed beforehand. Alternates A B A B ... and
// prints one JSON object: medians in seconds and the ratio.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/reader.hpp"

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench-page-reads DUMP [READS] [RUNS]\n");
        return 2;
    }
    size_t reads = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 1000000;
    int runs = argc > 3 ? std::atoi(argv[3]) : 5;
    try {
        auto reader = xendump::DumpReader::open(argv[1]);
        auto entries = reader.entries();
        if (entries.empty()) throw xendump::Error("the dump has no pages", argv[1]);
        std::mt19937_64 rng(42);
        std::vector<uint64_t> pfns(reads), offsets(reads);
        for (size_t i = 0; i < reads; ++i) {
            size_t idx = rng() % entries.size();
            pfns[i] = entries[idx].pfn;
            offsets[i] = reader.page_offset(idx);
        }
        xendump::UniqueFd fd(::open(argv[1], O_RDONLY | O_CLOEXEC));
        if (!fd) xendump::throw_errno("open", argv[1]);
        std::vector<std::byte> page(4096);
        uint64_t sink = 0;
        std::vector<double> a, b;
        for (int r = 0; r < runs; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            for (size_t i = 0; i < reads; ++i) {
                if (!reader.read_page_by_pfn(pfns[i], page)) return 1;
                sink += static_cast<uint64_t>(page[i & 4095]);
            }
            auto t1 = std::chrono::steady_clock::now();
            for (size_t i = 0; i < reads; ++i) {
                if (pread(fd.get(), page.data(), 4096, static_cast<off_t>(offsets[i])) != 4096) return 1;
                sink += static_cast<uint64_t>(page[i & 4095]);
            }
            auto t2 = std::chrono::steady_clock::now();
            a.push_back(std::chrono::duration<double>(t1 - t0).count());
            b.push_back(std::chrono::duration<double>(t2 - t1).count());
        }
        std::printf("{\"reads\": %zu, \"runs\": %d, \"libdump_s\": %.6f, \"pread_s\": %.6f, \"ratio\": %.4f, \"sink\": %llu}\n",
                    reads, runs, median(a), median(b), median(a) / median(b),
                    static_cast<unsigned long long>(sink & 1));
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench-page-reads: %s\n", e.what());
        return 1;
    }
}
