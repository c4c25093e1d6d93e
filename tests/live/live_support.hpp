// Helpers of the live suite (issue 35): simulated guests with a writer, and
// the check that tells an image of one instant of the writer from a torn one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hv/forwarding_hypervisor.hpp"
#include "sim/sim_writer.hpp"
#include "sim_test_util.hpp"
#include "xendump/dumper.hpp"
#include "xendump/reader.hpp"

namespace xendump::test::live {

using nlohmann::json;

// An HVM (or PVH, or PV) guest of `pages` pages at pfn 0 with a writer over
// pages 16 … pages − 1 (rate: writes per 1000 pages mapped).
json guest(uint32_t domid, const std::string& type, uint64_t pages, uint64_t rate, const std::string& pattern,
           uint64_t seed = 7);
json host_spec(std::vector<json> domains, bool shadow_paging = false);

// The writer of a domain spec, as the simulator parses it.
xendump::sim::WriterSpec writer_of(const json& domain);

struct Instant {
    uint64_t pages_checked = 0;  // writer pages found in the dump
    uint64_t written = 0;        // of them, holding a write (a stamp)
    uint64_t instant = 0;        // the latest generation in the image: T
    uint64_t torn = 0;           // pages that do not hold their last write before T
    bool consistent() const { return torn == 0; }
};

// Replays the writer up to the image's latest write and compares every
// page of its range in the dump with what the guest held at that instant.
// `present(pfn)`: pages the writer could write (not holes, not the p2m's).
// `skip`: pfns the writer leaves alone (a PV guest's p2m pages: p2m_pfns).
Instant check_instant(const std::filesystem::path& dump, const xendump::sim::WriterSpec& w,
                      const std::set<uint64_t>& skip = {});
// The same of a dump already open (an encrypted one, opened with its identity).
Instant check_instant(const DumpReader& dump, const xendump::sim::WriterSpec& w, const std::set<uint64_t>& skip = {});
std::set<uint64_t> p2m_pfns(const test::sim::Host& host, uint32_t domid);

// What a consistent live dump records in every form: LIVE=precopy, PAUSED=0
// and its pre-copy's LiveStats (the result's) as PAUSE_USEC=, LIVE_ROUNDS=
// and PAGES_RECOPIED=; `r` must have made rounds.
void expect_live_record(const DumpReader& dump, const DumpResult& r);

// The pages of two dumps that differ, read pfn by pfn; a failure (and
// UINT64_MAX) when they do not hold the same pfns on the same frames.
uint64_t pages_differing(const std::filesystem::path& a, const std::filesystem::path& b);

// A hypervisor that knows whether the domain is paused by the calls
// passing through it (the dump's own pause).
class PauseTracking : public ForwardingHypervisor {
public:
    using ForwardingHypervisor::ForwardingHypervisor;
    void pause(uint32_t domid) override {
        ForwardingHypervisor::pause(domid);
        ++paused_;
    }
    void unpause(uint32_t domid) override {
        --paused_;
        ForwardingHypervisor::unpause(domid);
    }
    bool paused() const { return paused_ > 0; }

private:
    int paused_ = 0;
};

// Drains a pipe into a file on a thread (a reader of standard output);
// `every` (when given) runs on that thread each time another `every_bytes`
// have been read, while the writer may be blocked on the full pipe.
class PipeToFile {
public:
    explicit PipeToFile(const std::filesystem::path& file, std::function<void()> every = {},
                        uint64_t every_bytes = 256 << 10);
    int fd() const { return fds_[1]; }
    // Closes the writing end and waits for the rest to be read.
    void close();
    ~PipeToFile();
    PipeToFile(const PipeToFile&) = delete;
    PipeToFile& operator=(const PipeToFile&) = delete;

private:
    int fds_[2] = {-1, -1};
    std::thread thread_;
};

// The writer's writes so far, from xen-dump-sim info --json.
json sim_info(const test::sim::Host& host, uint32_t domid);

}  // namespace xendump::test::live
