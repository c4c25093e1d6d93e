// xen-dumpctl verify FILE...: every conformance check of the format (spec §8),
// digests included. Exit 0 only when every file passes; otherwise one line
// per failed check: "FILE: check: structure at offset 0x…: message".
#include <cstdio>
#include <optional>

#include "cli.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

namespace {

constexpr std::string_view kUsage = "xen-dumpctl verify [--no-digests] [--quiet] FILE...";

bool verify_one(const std::string& file, bool digests, bool quiet) {
    std::optional<cli::ProgressBar> bar;
    VerifyOptions options;
    options.digests = digests;
    if (!quiet) {
        bar.emplace("verify " + file);
        options.on_progress = [&bar](uint64_t done, uint64_t total) { bar->update(done, total); };
    }
    auto findings = DumpReader::verify_file(file, options);
    if (bar) bar->finish();
    for (const auto& f : findings)
        std::printf("%s: %s: %s at offset 0x%llx: %s\n", file.c_str(), f.check.c_str(), f.structure.c_str(),
                    static_cast<unsigned long long>(f.offset), f.message.c_str());
    if (findings.empty() && !quiet) std::printf("%s: OK\n", file.c_str());
    return findings.empty();
}

}  // namespace

int cmd_verify(Args args) {
    auto p = parse_args(args, {"--no-digests", "--quiet"});
    if (p.help) {
        std::printf("usage: %.*s\n\nCheck dump files against the xen-dump-core format: ELF structure, notes,\n"
                    "the PFN->GMFN table, PT_LOAD runs, section placement and the digests.\n"
                    "Exit status 0 when every check passes, 1 otherwise.\n"
                    "  --no-digests   skip recomputing the page digests\n"
                    "  --quiet        print only failures, no progress bar\n",
                    static_cast<int>(kUsage.size()), kUsage.data());
        return cli::kExitOk;
    }
    if (!p.error.empty()) return usage_error("verify", p.error, kUsage);
    if (p.operands.empty()) return usage_error("verify", "expected at least one FILE", kUsage);
    bool ok = true;
    for (const auto& f : p.operands) ok = verify_one(f, !p.has("--no-digests"), p.has("--quiet")) && ok;
    return ok ? cli::kExitOk : cli::kExitFailure;
}

}  // namespace xendump::ctl
