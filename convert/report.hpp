// What happened to each file of a batch: the table on stdout and the JSON
// report (--json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xendump::convert {

enum class Result { converted, skipped, failed };
const char* to_string(Result r);

struct FileReport {
    std::string path;
    std::string output;   // empty when none
    std::string format;   // xc_core, xen-elf, v1, unknown
    std::string layout;   // LAYOUT= decision
    uint64_t pages = 0;
    bool inferred = false;
    Result result = Result::failed;
    std::string reason;   // why skipped ("already converted", "already current", "dry run")
    std::string error;    // why failed (one line)
    bool needs_key = false;  // failed only for want of an identity (an encrypted input, no -i)
};

void print_table(const std::vector<FileReport>& reports, bool dry_run);
void print_json(const std::vector<FileReport>& reports, bool dry_run);

}  // namespace xendump::convert
