#include "level_estimate.hpp"

#include "table.hpp"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace xendump::cli {

namespace {

struct ClassRow {
    const char* type;  // makedumpfile --mem-usage's names
    kernel::PageClass cls;
    const char* description;
};
constexpr ClassRow kRows[] = {
    {"ZERO", kernel::PageClass::zero, "pages filled with zero (bit 1: kept as the shared zero page)"},
    {"NON_PRI_CACHE", kernel::PageClass::cache, "cache pages without private flag (bit 2)"},
    {"PRI_CACHE", kernel::PageClass::cache_private, "cache pages with private flag (bit 4)"},
    {"USER", kernel::PageClass::user, "user process pages (bit 8)"},
    {"FREE", kernel::PageClass::free, "free pages (bit 16)"},
    {"HWPOISON", kernel::PageClass::hwpoison, "hardware-poisoned pages (always left out)"},
    {"OFFLINE", kernel::PageClass::offline, "logically offline pages (always left out)"},
};

}  // namespace

void print_level_estimate(const kernel::DumpLevelEstimate& e, const std::string& what, JsonStyle json,
                          double seconds) {
    constexpr uint64_t kPage = kernel::kPageSize;
    if (json) {
        nlohmann::json j;
        j["source"] = what;
        j["page_size"] = kPage;
        j["total_pages"] = e.total_pages;
        j["max_level"] = e.max_level;
        j["limits"] = e.limits;
        j["classes"] = nlohmann::json::object();
        for (const auto& r : kRows) j["classes"][kernel::page_class_name(r.cls)] = e.excluded[static_cast<size_t>(r.cls)];
        j["protected_pages"] = e.protected_pages;
        j["unreadable_struct_pages"] = e.unreadable_struct_pages;
        j["levels"] = nlohmann::json::array();
        // kept_pages: the compact file's pages (its 2nd bitmap), zero pages
        // included; kept_bytes: the page data of the others, before compression.
        for (const auto& l : e.levels)
            j["levels"].push_back({{"level", l.level},
                                   {"applied_level", l.applied},
                                   {"kept_pages", l.kept_pages},
                                   {"zero_pages", l.zero_pages},
                                   {"kept_bytes", (l.kept_pages - l.zero_pages) * kPage}});
        j["seconds"] = seconds;
        std::cout << j.dump(json.indent, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return;
    }
    std::printf("Source:      %s\n", what.c_str());
    std::printf("Pages:       %llu (%s)\n", static_cast<unsigned long long>(e.total_pages),
                human_bytes(e.total_pages * kPage).c_str());
    std::printf("Max level:   %u\n", e.max_level);
    for (const auto& l : e.limits) std::printf("Limit:       %s\n", l.c_str());
    std::printf("\n");
    Table types({{"TYPE"}, {"PAGES", true}, {"SIZE", true}, {"DESCRIPTION", false, true}});
    uint64_t excluded = 0;
    for (const auto& r : kRows) {
        const uint64_t n = e.excluded[static_cast<size_t>(r.cls)];
        excluded += n;
        types.add_row({r.type, std::to_string(n), human_bytes(n * kPage), r.description});
    }
    const uint64_t rest = e.total_pages >= excluded ? e.total_pages - excluded : 0;
    types.add_row({"KERN_DATA", std::to_string(rest), human_bytes(rest * kPage), "the rest: kept at every level"});
    types.print();
    std::printf("(%llu of them kept as needed for analysis although their struct page says otherwise; "
                "%llu pages kept whose struct page could not be read)\n",
                static_cast<unsigned long long>(e.protected_pages),
                static_cast<unsigned long long>(e.unreadable_struct_pages));
    // KEPT PAGES are the file's pages, ZERO PAGES those of them stored as its
    // shared zero page, SIZE the data of the others (before compression).
    std::printf("\n");
    Table levels({{"LEVEL"}, {"KEPT PAGES", true}, {"ZERO PAGES", true}, {"SIZE", true}, {"KEPT", true}});
    for (const auto& l : e.levels) {
        char kept[32];
        std::snprintf(kept, sizeof kept, "%.1f%%",
                      e.total_pages ? 100.0 * static_cast<double>(l.kept_pages) / static_cast<double>(e.total_pages) : 0.0);
        levels.add_row({std::to_string(l.level) + (l.applied != l.level ? " (as " + std::to_string(l.applied) + ")" : ""),
                        std::to_string(l.kept_pages), std::to_string(l.zero_pages),
                        human_bytes((l.kept_pages - l.zero_pages) * kPage), kept});
    }
    levels.print();
    std::printf("\nClassified in %.2f s.\n", seconds);
}

}  // namespace xendump::cli
