// The estimate of a progress bar's remaining time, kept apart from the
// terminal so that it can be tested: an ETA is shown only once the rate is
// known, never extrapolated from the first few pages of a pass (which include
// the pass's start-up and say nothing of its speed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace xendump::cli {

class EtaEstimate {
public:
    // How long the rate must have been measured for, or how much of the work
    // it must have covered (with a short minimum), before it is believed.
    static constexpr double kMinSeconds = 1.0;
    static constexpr double kMinFraction = 0.01;
    static constexpr double kMinSecondsAtFraction = 0.25;

    // `done` of `total` units at `seconds` (any monotonic clock).
    // Returns the seconds left, or nothing while the rate is not yet known.
    std::optional<double> update(uint64_t done, uint64_t total, double seconds);

    // "m:ss" (or "h:mm:ss"), "--" when unknown.
    static std::string format(std::optional<double> seconds_left);

private:
    bool started_ = false;
    uint64_t first_done_ = 0;
    double first_seconds_ = 0;
};

}  // namespace xendump::cli
