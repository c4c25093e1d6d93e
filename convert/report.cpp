#include "report.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "table.hpp"

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

// On a terminal DETAIL is cut to its width (--json has the whole text); on a
// pipe or in a file every line is whole (cli::Table).
void print_table(const std::vector<FileReport>& rs, bool dry_run) {
    cli::Table table({{"FILE"}, {"FORMAT"}, {"LAYOUT"}, {"PAGES", true}, {"RESULT"}, {"DETAIL", false, true}});
    for (const auto& r : rs) {
        const std::string& detail = r.result == Result::failed ? r.error : r.result == Result::skipped ? r.reason : r.output;
        table.add_row({r.path, r.format, r.layout.empty() ? "-" : r.layout, std::to_string(r.pages),
                       to_string(r.result), detail});
    }
    table.print();
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
