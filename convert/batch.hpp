// Runs a batch: finds the input files, converts each on a pool of worker
// threads, and returns one report per file. Idempotent (an output that exists,
// records this very source in SOURCE_ID= and verifies is "already converted")
// and resumable (outputs appear atomically, so a killed run leaves nothing
// half-written under a final name). A source is removed (--remove-source)
// only when its output records it.
#pragma once

#include <vector>

#include "options.hpp"
#include "report.hpp"

namespace xendump::convert {

std::vector<FileReport> run_batch(const Options& options);

}  // namespace xendump::convert
