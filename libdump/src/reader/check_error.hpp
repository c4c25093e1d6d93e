// An Error raised while opening a dump that also names the conformance check
// (spec §8) that failed, so `verify` can report a file that cannot even be
// opened in the same "check: structure at offset: message" form.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace xendump::reader
