#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace xendump::convert {

const char* to_string(Result r) {
    switch (r) {
    case Result::converted: return "converted";
    case Result::skipped: return "skipped";
    case Result::failed: return "failed";
    }
    return "?";
}

namespace {
struct Counts {
    size_t converted = 0, skipped = 0, failed = 0;
};
Counts count(const std::vector<FileReport>& rs) {
    Counts c;
    for (const auto& r : rs)
        (r.result == Result::converted ? c.converted : r.result == Result::skipped ? c.skipped : c.failed)++;
    return c;
}
}  // namespace

void print_table(const std::vector<FileReport>& rs, bool dry_run) {
    size_t wpath = 4, wlayout = 6;
    for (const auto& r : rs) {
        wpath = std::max(wpath, r.path.size());
        wlayout = std::max(wlayout, r.layout.size());
    }
    std::printf("%-*s  %-8s  %-*s  %8s  %-9s  %s\n", static_cast<int>(wpath), "FILE", "FORMAT",
                static_cast<int>(wlayout), "LAYOUT", "PAGES", "RESULT", "DETAIL");
    for (const auto& r : rs) {
        const std::string& detail = r.result == Result::failed ? r.error : r.result == Result::skipped ? r.reason : r.output;
        std::printf("%-*s  %-8s  %-*s  %8llu  %-9s  %s\n", static_cast<int>(wpath), r.path.c_str(), r.format.c_str(),
                    static_cast<int>(wlayout), r.layout.empty() ? "-" : r.layout.c_str(),
                    static_cast<unsigned long long>(r.pages), to_string(r.result), detail.c_str());
    }
    Counts c = count(rs);
    std::printf("%zu file(s): %zu converted, %zu skipped, %zu failed%s\n", rs.size(), c.converted, c.skipped,
                c.failed, dry_run ? " (dry run: nothing written)" : "");
    if (c.converted == 0 && c.failed == 0 && !dry_run) std::printf("nothing to convert\n");
}

void print_json(const std::vector<FileReport>& rs, bool dry_run) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& r : rs) {
        nlohmann::json j = {{"path", r.path},         {"format", r.format}, {"layout", r.layout},
                            {"pages", r.pages},       {"inferred", r.inferred},
                            {"result", to_string(r.result)}};
        j["output"] = r.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.output);
        j["reason"] = r.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.reason);
        j["error"] = r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error);
        files.push_back(std::move(j));
    }
    Counts c = count(rs);
    nlohmann::json doc = {{"dry_run", dry_run},
                          {"files", files},
                          {"summary", {{"converted", c.converted}, {"skipped", c.skipped}, {"failed", c.failed}}}};
    std::printf("%s\n", doc.dump(2).c_str());
}

}  // namespace xendump::convert
