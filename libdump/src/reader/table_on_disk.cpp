#include "reader/table_on_disk.hpp"

#include <algorithm>
#include <cstring>

#include "xendump/error.hpp"

namespace xendump::reader {

TableOnDisk::TableOnDisk(std::shared_ptr<const DumpFile> file, uint64_t offset, uint64_t count, uint64_t entry_size,
                         std::string structure)
    : file_(std::move(file)), offset_(offset), count_(count), entry_size_(entry_size), structure_(std::move(structure)) {}

TableOnDisk::TableOnDisk(std::shared_ptr<const DumpFile> file, uint64_t count, Make make, std::string structure)
    : file_(std::move(file)), count_(count), structure_(std::move(structure)), make_(std::move(make)) {}

void TableOnDisk::read(uint64_t first, std::span<PageEntry> out) const {
    if (first > count_ || count_ - first < out.size())
        throw Error("entries " + std::to_string(first) + "+" + std::to_string(out.size()) + " are past the table (" +
                        std::to_string(count_) + " entries)",
                    file_->path());
    if (out.empty()) return;
    if (make_) return make_(first, out);
    auto bytes = std::as_writable_bytes(out);
    if (entry_size_ == sizeof(PageEntry)) {
        file_->read_exact(offset_ + first * entry_size_, bytes, structure_);
        return;
    }
    // Bare pfns into the first half, spread from the end ({pfn, pfn}).
    const size_t n = out.size();
    file_->read_exact(offset_ + first * 8, bytes.first(n * 8), structure_);
    for (size_t i = n; i-- > 0;) {
        uint64_t pfn;
        std::memcpy(&pfn, bytes.data() + i * 8, 8);
        out[i] = {pfn, pfn};
    }
}

PageEntry TableOnDisk::at(uint64_t i) const {
    if (i >= count_)
        throw Error("entry " + std::to_string(i) + " is past the table (" + std::to_string(count_) + " entries)",
                    file_->path());
    const uint64_t first = i / kBlock * kBlock;
    std::lock_guard lock(cache_->mutex);
    Block& b = cache_->blocks[(i / kBlock) % kBlocks];
    if (b.first != first) {
        b.first = ~uint64_t{0};
        b.entries.resize(static_cast<size_t>(std::min(kBlock, count_ - first)));
        read(first, b.entries);
        b.first = first;
    }
    return b.entries[static_cast<size_t>(i - first)];
}

}  // namespace xendump::reader
