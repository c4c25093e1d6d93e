// The PFN->GMFN table as a reader holds it: 16 bytes a page (16 MiB for a
// 4 GiB guest), filled by one read from the file. Its memory is neither
// zeroed first (the read overwrites every byte) nor faulted in 4 KiB at a
// time: blocks of 2 MiB or more come from their own mapping with transparent
// huge pages requested, which makes opening a large dump several times
// cheaper where page faults are expensive (virtual machines).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

#include "xendump/page_source.hpp"

namespace xendump::reader {

template <class T>
struct BulkAllocator {
    using value_type = T;
    static constexpr size_t kHuge = size_t{2} << 20;

    BulkAllocator() = default;
    template <class U>
    BulkAllocator(const BulkAllocator<U>&) noexcept {}

    static size_t mapped_size(size_t n) { return (n * sizeof(T) + kHuge - 1) & ~(kHuge - 1); }

    T* allocate(size_t n) {
        if (n * sizeof(T) < kHuge) return static_cast<T*>(::operator new(n * sizeof(T)));
        void* p = ::mmap(nullptr, mapped_size(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        ::madvise(p, mapped_size(n), MADV_HUGEPAGE);  // a hint: without THP, plain pages
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t n) noexcept {
        if (n * sizeof(T) < kHuge)
            ::operator delete(p);
        else
            ::munmap(p, mapped_size(n));
    }
    // Default-initialise: for the table's plain structs, leave the bytes to
    // the read that follows.
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... A>
    void construct(U* p, A&&... a) {
        ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
    friend bool operator==(const BulkAllocator&, const BulkAllocator&) { return true; }
};

using EntryTable = std::vector<PageEntry, BulkAllocator<PageEntry>>;

}  // namespace xendump::reader
