// xen-dumpctl verify FILE|MATCH...: every conformance check of the format
// (xen-dump-core(5) "Conformance"), digests included, of each FILE, or of every dump MATCH selects
// (dump_selection.hpp; -1 for the latest only). Exit 0 only when every file
// passes; otherwise one line per failed check: "FILE: check: structure at
// offset 0x…: message", and one per selected dump whose file is gone.
#include <cstdio>
#include <optional>

#include "cli.hpp"
#include "commands.hpp"
#include "dump_selection.hpp"
#include "options.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

namespace {

bool verify_one(const std::string& file, const VerifyOptions& base, bool quiet) {
    std::optional<cli::ProgressBar> bar;
    VerifyOptions options = base;
    if (!quiet) {
        bar.emplace("verify " + file);
        options.on_progress = [&bar](uint64_t done, uint64_t total) { bar->update(done, total); };
    }
    const VerifyReport rep = DumpReader::verify_file_report(file, options);
    if (bar) bar->finish();
    bool absent = false;
    for (const auto& f : rep.findings) {
        std::printf("%s: %s: %s at offset 0x%llx: %s\n", file.c_str(), f.check.c_str(), f.structure.c_str(),
                    static_cast<unsigned long long>(f.offset), f.message.c_str());
        absent = absent || f.check == "digests-absent";
    }
    if (absent)
        std::fprintf(stderr,
                     "xen-dumpctl verify: %s has no digests; --allow-no-digests accepts a file written without "
                     "them (its structure alone is then checked)\n",
                     file.c_str());
    if (!rep.findings.empty()) return false;
    if (rep.digests == DigestCheck::absent)
        std::printf("%s: OK without digests (--allow-no-digests): the structure was checked; there are no digests "
                    "to check the pages against\n",
                    file.c_str());
    else if (!quiet && rep.digests == DigestCheck::skipped)
        std::printf("%s: OK, structure only (--no-digests): the page contents were not checked\n", file.c_str());
    else if (!quiet)
        std::printf("%s: OK\n", file.c_str());
    return true;
}

}  // namespace

int cmd_verify(Invocation& c) {
    const ParsedArgs& p = c.p;
    const Targets& targets = c.targets;
    VerifyOptions options;
    options.digests = !p.has("--no-digests");
    options.allow_no_digests = p.has("--allow-no-digests");
    bool ok = targets.missing.empty();
    for (const auto& f : targets.missing)
        std::printf("%s: missing: its sidecar records the dump, the file is gone\n", f.c_str());
    for (const auto& f : targets.files) ok = verify_one(f.string(), options, p.has("--quiet")) && ok;
    return ok ? cli::kExitOk : cli::kExitFailure;
}

}  // namespace xendump::ctl
