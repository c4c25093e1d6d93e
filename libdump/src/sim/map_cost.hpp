// The simulated cost of foreign mapping (spec key map_cost): a fixed cost
// per call plus a cost per page. Microsecond costs must be honoured exactly,
// which plain sleeps cannot do (timer slack is ~50 µs), so the wait sleeps
// with clock_nanosleep to an absolute deadline and spins the last stretch.
#pragma once

#include <cstdint>

namespace xendump::sim {

void wait_map_cost(uint64_t per_call_us, uint64_t per_page_ns, uint64_t pages);

}  // namespace xendump::sim
