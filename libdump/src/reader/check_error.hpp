// An Error raised while opening a dump that also names the conformance check
// (xen-dump-core(5) "Conformance") that failed, so `verify` can report a file that cannot even be
// opened in the same "check: structure at offset: message" form.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::reader {

class CheckError : public Error {
public:
    CheckError(Finding finding, const std::string& file)
        : Error(finding.structure + ": " + finding.message, file, finding.offset),
          finding_(std::move(finding)) {}
    const Finding& finding() const noexcept { return finding_; }
    const std::string& check() const noexcept { return finding_.check; }

private:
    Finding finding_;
};

// Findings gathered from untrusted structures, at most `per_check` of each
// check kept (the first ones); the rest are counted and summed up in one more
// finding per check by finish(). A file of a million bad headers costs a
// bounded list, not a message per header.
class FindingList {
public:
    explicit FindingList(std::vector<Finding>& out, size_t per_check = 32) : out_(out), per_check_(per_check) {}

    void add(Finding f) {
        for (auto& c : counts_)
            if (c.check == f.check) {
                if (++c.count > per_check_) return;
                out_.push_back(std::move(f));
                return;
            }
        counts_.push_back({f.check, f.structure, f.offset, 1});
        out_.push_back(std::move(f));
    }
    // Appends "N more" for every check that had more than `per_check`.
    void finish() {
        for (const auto& c : counts_)
            if (c.count > per_check_)
                out_.push_back({c.check, c.structure, c.offset,
                                std::to_string(c.count - per_check_) + " more findings of this check left out"});
        counts_.clear();
    }

private:
    struct Count {
        std::string check, structure;
        uint64_t offset;
        size_t count;
    };
    std::vector<Finding>& out_;
    size_t per_check_;
    std::vector<Count> counts_;  // a few distinct checks: linear search
};

}  // namespace xendump::reader
