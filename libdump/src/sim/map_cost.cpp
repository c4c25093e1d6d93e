#include "sim/map_cost.hpp"

#include <time.h>

#include <cerrno>

namespace xendump::sim {

namespace {

int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

constexpr int64_t kSpinNs = 100000;  // below this, spin instead of sleeping

}  // namespace

void wait_map_cost(uint64_t per_call_us, uint64_t per_page_ns, uint64_t pages) {
    const uint64_t cost = per_call_us * 1000 + per_page_ns * pages;
    if (cost == 0) return;
    const int64_t deadline = now_ns() + static_cast<int64_t>(cost);
    for (;;) {
        const int64_t left = deadline - now_ns();
        if (left <= 0) return;
        if (left > kSpinNs) {
            const int64_t wake = deadline - kSpinNs;
            timespec ts{static_cast<time_t>(wake / 1000000000), static_cast<long>(wake % 1000000000)};
            int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
            if (rc != 0 && rc != EINTR) return;
        }
    }
}

}  // namespace xendump::sim
