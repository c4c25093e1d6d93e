// Work split in two halves, the second on another thread when the machine
// has a second core and the work is worth it. Both halves end before this
// returns (whatever they use may go away after); the first half's exception
// wins, else the second's.
#pragma once

#include <cstdint>
#include <exception>
#include <future>
#include <thread>

namespace xendump {

// Calls half(from, to, second) for [0, split) and [split, n); `second` says
// which half is running (for per-thread buffers, one progress reporter).
template <class Half>
void in_two_halves(uint64_t n, bool worth_it, Half half) {
    const bool two = worth_it && std::thread::hardware_concurrency() > 1;
    const uint64_t split = two ? n / 2 : n;
    std::future<void> second;
    if (two) second = std::async(std::launch::async, [&] { half(split, n, true); });
    std::exception_ptr first_error;
    try {
        half(uint64_t{0}, split, false);
    } catch (...) {
        first_error = std::current_exception();
    }
    if (second.valid()) {
        try {
            second.get();
        } catch (...) {
            if (!first_error) first_error = std::current_exception();
        }
    }
    if (first_error) std::rethrow_exception(first_error);
}

}  // namespace xendump
