#include "cli.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "xendump/writer.hpp"

namespace xendump::cli {

unsigned default_threads(unsigned sharing) {
    // The cores this process may run on (a service's CPUAffinity= or a
    // taskset shrink them), else all the machine has.
    unsigned cores = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cores = static_cast<unsigned>(CPU_COUNT(&set));
    if (cores == 0) cores = std::thread::hardware_concurrency();
    return std::clamp(cores / std::max(sharing, 1u), 1u, kMaxWriteThreads);
}

std::string human_bytes(uint64_t bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        ++u;
    }
    char buf[32];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    else
        std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

ProgressBar::ProgressBar(std::string label, bool auto_detect)
    : label_(std::move(label)),
      enabled_(auto_detect && isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(uint64_t done, uint64_t total) {
    if (!enabled_ || finished_) return;
    auto now = std::chrono::steady_clock::now();
    if (finding_) {
        finding_ = false;
        start_ = now;
    }
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    double secs = std::chrono::duration<double>(now - start_).count();
    double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    double pct = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
    int width = 30;
    int filled = static_cast<int>(pct / 100.0 * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(static_cast<size_t>(width), '.');
    const std::string eta = EtaEstimate::format(eta_.update(done, total, secs));
    std::fprintf(stderr, "\r%s [%s] %5.1f%% %s/%s %s/s ETA %s\033[K", label_.c_str(), bar.c_str(), pct,
                 human_bytes(done).c_str(), human_bytes(total).c_str(),
                 human_bytes(static_cast<uint64_t>(rate)).c_str(), eta.c_str());
    std::fflush(stderr);
}

void ProgressBar::finding_pages(uint64_t done, uint64_t total) {
    if (!enabled_ || finished_) return;
    finding_ = true;
    auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double pct = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0;
    std::fprintf(stderr, "\r%s: finding pages, %5.1f%% of %llu pfns examined\033[K", label_.c_str(), pct,
                 static_cast<unsigned long long>(total));
    std::fflush(stderr);
}

std::string live_round_text(unsigned round, uint64_t dirty, bool final) {
    const std::string pages = std::to_string(dirty) + (dirty == 1 ? " page" : " pages");
    if (final) return "paused for the last pre-copy round: " + pages + " to copy";
    return "pre-copy round " + std::to_string(round) + ": " + pages + " dirtied, copying again";
}

void ProgressBar::live_round(unsigned round, uint64_t dirty, bool final) {
    if (!enabled_ || finished_) return;
    std::fprintf(stderr, "\r%s: %s\033[K", label_.c_str(), live_round_text(round, dirty, final).c_str());
    std::fflush(stderr);
}

void ProgressBar::finish() {
    if (!enabled_ || finished_) return;
    finished_ = true;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
}

}  // namespace xendump::cli
