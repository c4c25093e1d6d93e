// xen-dump-convert: converts old Xen dumps to xen-dump-core v1 files
// (issue 4). Options in options.cpp, the batch in batch.cpp, the report in
// report.cpp; the conversion itself is libdump's legacy module.
#include <cstdio>
#include <exception>

#include "batch.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "report.hpp"

int main(int argc, char** argv) {
    using namespace xendump;
    convert::Options options;
    switch (convert::parse_options(argc, argv, options)) {
    case convert::ParseStatus::exit_ok: return cli::kExitOk;
    case convert::ParseStatus::usage_error: return cli::kExitUsage;
    case convert::ParseStatus::run: break;
    }
    try {
        auto reports = convert::run_batch(options);
        if (options.json)
            convert::print_json(reports, options.dry_run);
        else if (!options.quiet)
            convert::print_table(reports, options.dry_run);
        for (const auto& r : reports)
            if (r.result == convert::Result::failed) return cli::kExitFailure;
        return cli::kExitOk;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xen-dump-convert: %s\n", e.what());
        return cli::kExitUsage;
    }
}
