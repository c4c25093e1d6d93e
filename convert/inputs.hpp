// Which files a batch works on and where each one's output goes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "options.hpp"

namespace xendump::convert {

struct Job {
    std::filesystem::path input;
    std::filesystem::path output;
    uint64_t size = 0;
};

// Expands directories recursively (sorted, hidden temporaries and our own
// outputs' temporaries skipped). An input that does not exist becomes a Job
// whose conversion will fail with a clear message.
std::vector<Job> collect_jobs(const Options& options);

// NAME.v1.core for NAME or NAME.core.
std::string default_output_name(const std::string& input_name);

}  // namespace xendump::convert
