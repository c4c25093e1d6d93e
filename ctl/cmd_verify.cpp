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

constexpr std::string_view kUsage =
    "xen-dumpctl verify [--no-digests] [--allow-no-digests] [-q|--quiet] [-S TIME] [-U TIME] [-r] [-1 | -n N] "
    "[--dump-dir DIR] [--config FILE] FILE|MATCH...";

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

int cmd_verify(Args args) {
    auto a = parse_file_command(args, true);
    const ParsedArgs& p = a.p;
    if (p.help) {
        std::printf("usage: %.*s\n\nCheck dump files against the xen-dump-core format: ELF structure, notes,\n"
                    "the PFN->GMFN table, PT_LOAD runs, section placement and the digests.\n"
                    "A file without digests fails unless --allow-no-digests is given.\n"
                    "Exit status 0 when every check passes, 1 otherwise. The OK line of a file\n"
                    "accepted with --allow-no-digests says the pages were not checked.\n"
                    "Every dump MATCH selects is checked (-1 for the latest only); a selected dump\n"
                    "whose file is gone is a failure (\"FILE: missing\").\n%s\n%s",
                    static_cast<int>(kUsage.size()), kUsage.data(), kSelectionHelp, options_help("verify").c_str());
        return cli::kExitOk;
    }
    if (!a.error.empty()) return usage_error("verify", a.error);
    const Targets targets = resolve_targets(a.service, a.selection, true);
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
