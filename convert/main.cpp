// xen-dump-convert: converts old Xen dumps to xen-dump-core v1 files
// (issue 4). Options in options.cpp, the batch in batch.cpp, the report in
// report.cpp; the conversion itself is libdump's legacy module.
#include <cstdio>
#include <exception>

#include "batch.hpp"
#include "cli.hpp"
#include "identity.hpp"
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
        // A failure for want of a key only (an encrypted input, no -i): 3, as
        // xen-dumpctl exits; any other failure: 1.
        bool needs_key = false;
        for (const auto& r : reports) {
            if (r.result == convert::Result::failed && !r.needs_key) return cli::kExitFailure;
            needs_key = needs_key || r.needs_key;
        }
        return needs_key ? cli::kExitNeedsKey : cli::kExitOk;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xen-dump-convert: %s\n", e.what());
        return cli::kExitUsage;
    }
}
