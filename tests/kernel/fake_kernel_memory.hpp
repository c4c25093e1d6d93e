// Kernel virtual memory for tests that build a guest kernel's structures by
// hand (the printk buffer, stacks and ORC tables): a few regions of bytes at
// kernel virtual addresses, read through a kernel::VirtualReader.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "xendump/kernel/printk_log.hpp"

namespace xendump::test {

// Kernel virtual memory as a few regions of bytes; everything else unmapped.
class FakeKernelMemory {
public:
    std::vector<std::byte>& map(uint64_t base, size_t size) {
        auto& r = regions_[base];
        r.assign(size, std::byte{0});
        return r;
    }
    void unmap(uint64_t base) { regions_.erase(base); }
    bool read(uint64_t va, std::span<std::byte> out) const {
        ++reads;
        auto it = regions_.upper_bound(va);
        if (it == regions_.begin()) return false;
        --it;
        const uint64_t off = va - it->first;
        if (off > it->second.size() || it->second.size() - off < out.size()) return false;
        std::memcpy(out.data(), it->second.data() + off, out.size());
        return true;
    }
    template <class T>
    void put(uint64_t va, T value) {
        auto it = regions_.upper_bound(va);
        ASSERT_NE(it, regions_.begin());
        --it;
        ASSERT_LE(va - it->first + sizeof(T), it->second.size());
        std::memcpy(it->second.data() + (va - it->first), &value, sizeof(T));
    }
    void put_bytes(uint64_t va, std::string_view bytes) {
        for (size_t i = 0; i < bytes.size(); ++i) put<char>(va + i, bytes[i]);
    }
    kernel::VirtualReader reader() const {
        return [this](uint64_t va, std::span<std::byte> out) { return read(va, out); };
    }

    mutable size_t reads = 0;

private:
    std::map<uint64_t, std::vector<std::byte>> regions_;
};

}  // namespace xendump::test
