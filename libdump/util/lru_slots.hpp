// A few values kept by index, the least recently used one given up for a
// new one: the caches of the readers' byte layers (the age decryptor's
// chunks, the store reader's blocks), which fill a value without their lock
// and keep it after. Not synchronised: the caller holds its lock.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace xendump::util {

template <class T>
class LruSlots {
public:
    explicit LruSlots(size_t slots) : slots_(std::max<size_t>(slots, 1)) {}

    // The value kept for `index`, now the most recently used; nullptr when none is.
    T* find(uint64_t index) {
        for (Slot& s : slots_)
            if (s.index == index) {
                s.used = ++clock_;
                return &s.value;
            }
        return nullptr;
    }
    // Keeps `value` for `index` in the least recently used slot, unless a
    // value is kept for `index` already (another thread's, filled meanwhile).
    void keep(uint64_t index, T value) {
        Slot* slot = &slots_[0];
        for (Slot& s : slots_) {
            if (s.index == index) return;
            if (s.used < slot->used) slot = &s;
        }
        slot->value = std::move(value);
        slot->index = index;
        slot->used = ++clock_;
    }

private:
    struct Slot {
        uint64_t index = UINT64_MAX;
        uint64_t used = 0;
        T value{};
    };
    std::vector<Slot> slots_;
    uint64_t clock_ = 0;
};

}  // namespace xendump::util
