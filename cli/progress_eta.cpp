#include "progress_eta.hpp"

#include <cmath>
#include <cstdio>

namespace xendump::cli {

std::optional<double> EtaEstimate::update(uint64_t done, uint64_t total, double seconds) {
    // The rate is measured from the first sample that shows work done, so the
    // time before the first page (pausing, the p2m walk) does not count.
    if (!started_) {
        if (done == 0) return std::nullopt;
        started_ = true;
        first_done_ = done;
        first_seconds_ = seconds;
        return std::nullopt;
    }
    if (done < first_done_ || total < done) return std::nullopt;
    const double elapsed = seconds - first_seconds_;
    const double covered = static_cast<double>(done - first_done_);
    if (covered <= 0 || elapsed <= 0) return std::nullopt;
    const bool long_enough = elapsed >= kMinSeconds;
    const bool far_enough = total > 0 && covered >= kMinFraction * static_cast<double>(total) &&
                            elapsed >= kMinSecondsAtFraction;
    if (!long_enough && !far_enough) return std::nullopt;
    return static_cast<double>(total - done) * elapsed / covered;
}

std::string EtaEstimate::format(std::optional<double> seconds_left) {
    if (!seconds_left || !std::isfinite(*seconds_left) || *seconds_left < 0) return "--";
    const auto left = static_cast<long long>(std::llround(*seconds_left));
    char b[48];
    if (left >= 3600)
        std::snprintf(b, sizeof b, "%lld:%02lld:%02lld", left / 3600, left / 60 % 60, left % 60);
    else
        std::snprintf(b, sizeof b, "%lld:%02lld", left / 60, left % 60);
    return b;
}

}  // namespace xendump::cli
