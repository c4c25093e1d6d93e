// Test helpers: does a list of findings hold (check, offset)?
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "xendump/reader.hpp"

namespace xendump::test {

inline std::string describe(const std::vector<Finding>& fs) {
    std::string s;
    for (const auto& f : fs) {
        char off[32];
        std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(f.offset));
        s += "  " + f.check + ": " + f.structure + " at " + off + ": " + f.message + "\n";
    }
    return s.empty() ? "  (no findings)\n" : s;
}

inline ::testing::AssertionResult has_finding(const std::vector<Finding>& fs, const std::string& check,
                                              uint64_t offset) {
    for (const auto& f : fs)
        if (f.check == check && f.offset == offset) return ::testing::AssertionSuccess();
    char off[32];
    std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(offset));
    return ::testing::AssertionFailure() << "no finding " << check << " at " << off << "; got:\n" << describe(fs);
}

}  // namespace xendump::test
