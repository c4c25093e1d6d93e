// The PFN->GMFN table where it lies, in the dump file: entries are read in
// bounded windows (streaming passes) or through a small block cache (single
// lookups), never all at once, so a reader's memory does not grow with the
// guest. v1 / .xen_p2m entries are {pfn, gmfn} pairs (16 bytes); .xen_pfn
// entries (HVM/PVH xl dump-core) are bare pfns (8 bytes, gmfn == pfn). A
// compact (kdump) file of an HVM or PVH guest has no table: its entries are
// made from the 2nd bitmap's runs by a function (`Make`).
#pragma once

#include <array>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "reader/dump_file.hpp"
#include "xendump/page_source.hpp"

namespace xendump::reader {

class TableOnDisk {
public:
    // Entries a window holds: 1 MiB of 16-byte entries.
    static constexpr uint64_t kWindow = 65536;

    TableOnDisk() = default;
    TableOnDisk(std::shared_ptr<const DumpFile> file, uint64_t offset, uint64_t count, uint64_t entry_size,
                std::string structure);

    // Entries [first, first + out.size()) made, not read.
    using Make = std::function<void(uint64_t first, std::span<PageEntry> out)>;
    TableOnDisk(std::shared_ptr<const DumpFile> file, uint64_t count, Make make, std::string structure);

    uint64_t size() const { return count_; }
    uint64_t entry_size() const { return entry_size_; }
    const std::string& structure() const { return structure_; }
    // Drops entries from the end (xen_elf: trailing all-ones padding).
    void truncate(uint64_t count) { count_ = count; }

    // Entry i (< size()) through a cache of a few blocks; thread-safe.
    PageEntry at(uint64_t i) const;

    // Entries [first, first + count) into out (count <= out.size()).
    void read(uint64_t first, std::span<PageEntry> out) const;

    // Calls f(index, entry) for every entry of [first, size()) in order,
    // reading one window at a time; f returns false to stop.
    template <class F>
    void scan(F f, uint64_t first = 0) const {
        std::vector<PageEntry> w(static_cast<size_t>(std::min<uint64_t>(kWindow, count_ - std::min(first, count_))));
        for (uint64_t at = first; at < count_; at += w.size()) {
            const auto n = static_cast<size_t>(std::min<uint64_t>(w.size(), count_ - at));
            read(at, std::span(w).first(n));
            for (size_t k = 0; k < n; ++k)
                if (!f(at + k, w[k])) return;
        }
    }

private:
    static constexpr uint64_t kBlock = 4096;  // entries per cached block
    static constexpr size_t kBlocks = 16;     // 1 MiB of cache at most
    struct Block {
        uint64_t first = ~uint64_t{0};
        std::vector<PageEntry> entries;
    };

    struct Cache {
        std::mutex mutex;
        std::array<Block, kBlocks> blocks;
    };

    std::shared_ptr<const DumpFile> file_;
    uint64_t offset_ = 0, count_ = 0, entry_size_ = 16;
    std::string structure_;
    Make make_;
    std::unique_ptr<Cache> cache_ = std::make_unique<Cache>();
};

}  // namespace xendump::reader
