// Shared by the command-line programs: exit codes, error printing, sizes, and
// a terminal progress bar (bytes, rate, ETA) that stays silent on a pipe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "progress_eta.hpp"

namespace xendump::cli {

// Exit codes (documented in every man page's EXIT STATUS).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the operation failed (or verify found problems)
inline constexpr int kExitUsage = 2;    // bad command line

std::string human_bytes(uint64_t bytes);  // "1.5 GiB"

// The threads of one write (WriteOptions::threads) when none are asked for:
// the machine's cores shared among `sharing` writes that run at once, from 1
// to kMaxWriteThreads (xendump/writer.hpp).
unsigned default_threads(unsigned sharing = 1);

// "pre-copy round N: M pages dirty" (or the paused last round's words):
// the bar's and xen-dumpctl status's.
std::string live_round_text(unsigned round, uint64_t dirty, bool final);

class ProgressBar {
public:
    // `enabled` false (or stderr not a terminal when `auto_detect`) -> prints nothing.
    explicit ProgressBar(std::string label, bool auto_detect = true);
    ~ProgressBar();
    void update(uint64_t done, uint64_t total);
    // Before the bytes: a dump finding its guest's pages, `done` pfns
    // examined of `total` (WriteProgress::finding_pages).
    void finding_pages(uint64_t done, uint64_t total);
    // After the bytes, a live dump's pre-copy rounds (WriteProgress::live_round).
    void live_round(unsigned round, uint64_t dirty, bool final);
    void finish();
    bool enabled() const { return enabled_; }

private:
    std::string label_;
    bool enabled_;
    bool finished_ = false;
    bool finding_ = false;  // finding_pages() shown: the bytes' rate starts at the first update()
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_;
    EtaEstimate eta_;
};

}  // namespace xendump::cli
