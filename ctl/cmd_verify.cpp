// xen-dumpctl verify FILE|MATCH...: every conformance check of the format
// (xen-dump-core(5) "Conformance"), digests included, of each FILE, or of every dump MATCH selects
// (dump_selection.hpp; -1 for the latest only). Exit 0 only when every file
// passes; otherwise one line per failed check: "FILE: check: structure at
// offset 0x…: message", and one per selected dump whose file is gone. An
// encrypted file without an identity: its age header only, exit 3 when
// nothing failed (encrypted.hpp).
#include <cstdio>
#include <optional>

#include "cli.hpp"
#include "commands.hpp"
#include "encrypted.hpp"
#include "dump_selection.hpp"
#include "options.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

namespace {

// An encrypted file and no identity: its age header is checked (it parses,
// its stanzas are well-formed; the MAC needs the key), the pages are not.
// nullopt for a plain file.
std::optional<bool> verify_locked(const std::string& file, const OpenOptions& open) {
    if (!open.identity_files.empty()) return std::nullopt;
    // A header that does not parse is an Error ("age header: ..."), as a file
    // that cannot be read: one line, exit 1.
    const std::optional<EncryptionInfo> e = encryption_of(file);
    if (!e) return std::nullopt;
    std::printf("%s: %s: the age header is well-formed; the pages need a key (-i FILE): not checked\n", file.c_str(),
                describe_encryption(*e).c_str());
    return true;
}

bool verify_one(const std::string& file, const VerifyOptions& base, const OpenOptions& open, bool quiet) {
    std::optional<cli::ProgressBar> bar;
    VerifyOptions options = base;
    if (!quiet) {
        bar.emplace("verify " + file);
        options.on_progress = [&bar](uint64_t done, uint64_t total) { bar->update(done, total); };
    }
    const VerifyReport rep = DumpReader::verify_file_report(file, options, open);
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
    bool ok = targets.missing.empty(), locked = false;
    for (const auto& f : targets.missing)
        std::printf("%s: missing: its sidecar records the dump, the file is gone\n", f.c_str());
    for (const auto& f : targets.files) {
        if (auto header_ok = verify_locked(f.string(), c.open)) {
            ok = *header_ok && ok;
            locked = locked || *header_ok;
            continue;
        }
        ok = verify_one(f.string(), options, c.open, p.has("--quiet")) && ok;
    }
    // A failure is a failure; else encrypted files whose pages were not checked: 3.
    return !ok ? cli::kExitFailure : locked ? kExitNeedsKey : cli::kExitOk;
}

}  // namespace xendump::ctl
