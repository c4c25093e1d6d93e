// Which files a batch works on and where each one's output goes.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "options.hpp"
#include "report.hpp"
#include "xendump/s3.hpp"

namespace xendump::convert {

struct Job {
    std::filesystem::path input;
    std::filesystem::path output;
    uint64_t size = 0;
    // Set when the file is settled without converting it: `why` is the
    // reason (skipped) or the error (failed), one line naming the file.
    std::optional<Result> settled;
    std::string why;
    std::string format = "unknown";  // sniffed before the batch runs
    bool named = false;              // named on the command line, not found in a directory
    bool needs_key = false;          // failed: encrypted, and no identity (cli::KeyNeeded)

    void settle(Result r, std::string text) {
        settled = r;
        why = std::move(text);
    }
};

// Expands directories recursively (sorted, hidden temporaries and our own
// outputs' temporaries skipped). Never waits on and never aborts for one
// entry: an input that does not exist, cannot be followed (a symlink loop)
// or is not a regular file becomes a settled Job: failed when the command
// line named it, skipped when a directory held it (FIFOs, sockets, devices,
// links to directories), failed when it cannot be examined at all.
std::vector<Job> collect_jobs(const Options& options);

// NAME.v1.core (NAME.kdump for compact outputs) for NAME or NAME.core.
std::string default_output_name(const std::string& input_name, bool kdump = false);

// Standard input as an input operand: a flattened stream (xen-dump-convert -
// -o FILE), never sniffed before it is read.
inline constexpr const char* kStdin = "-";

// Where the output of `input` goes by default (no -o, no --output-dir):
// beside it, default_output_name (plus ".age" when encrypted). A flattened
// input's output is the compact file it carries: NAME.kdump.
std::filesystem::path output_beside(const Options& options, const std::filesystem::path& input, bool kdump);

// A client of the store for `object` (s3://BUCKET/KEY): its endpoint,
// region and credentials as xen-dumpd -o s3:// takes them (AWS_* variables,
// the systemd credential, the shared credentials file; never argv). Throws
// Error naming `object` when there are none.
std::unique_ptr<s3::Client> store_client(const std::string& object);

// Settles every job whose output another job would also write (naming all of
// them: none is converted) or whose output is its own input. Only jobs not
// yet settled take part.
void refuse_shared_outputs(std::vector<Job>& jobs);

}  // namespace xendump::convert
