// `xen-dumpd --domain ID|NAME`: asks the running service when its control
// socket answers (progress shown, path printed), else dumps by itself.
// `-o PATH` and `-o -` are always done by the command itself: the service
// writes only into its own dump directory. A compact dump to `-o -` is
// makedumpfile's flattened stream (`| makedumpfile -R FILE`). `--estimate` classifies the
// paused guest's pages by itself and prints what each dump level keeps.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "json_style.hpp"
#include "xendump/dumper.hpp"
#include "xendump/kdump.hpp"

namespace xendump::daemon {

struct OneShotOptions {
    std::string domain;
    std::optional<std::string> output;  // PATH or "-"
    bool live = false;  // --live=inconsistent
    bool paused = false;  // --live=no: paused for the whole copy, whatever Live= says
    // --live (consistent: pre-copy), --max-pause, --live-rounds, --leave-paused.
    DumpOptions::Precopy precopy;
    bool digests = true;
    // --format (--compress, --dump-level): unset, the configuration's
    // Format=, Compress=, DumpLevel= for the domain (-o: v1).
    std::optional<DumpFormat> format;
    // --flattened (-F): a compact dump to -o FILE in makedumpfile's flattened
    // format (-o - writes that format whatever this says).
    bool flattened = false;
    // -r/-R (canonical): the dump is encrypted to them; unset: to the
    // configuration's Recipient=/RecipientsFile= for the guest (also with -o).
    std::optional<std::vector<std::string>> recipients;
    bool estimate = false;  // --estimate: what each dump level keeps; no dump
    unsigned estimate_level = 0;  // --estimate --dump-level N: level N's row too
    cli::JsonStyle json;    // --json (with --estimate)
    bool quiet = false;
    // --threads is in overrides (it also names the service's Threads=): sent
    // with a request to the service, used for a dump made here.
    std::filesystem::path config_file;
    ConfigOverrides overrides;
};

int run_one_shot(const OneShotOptions& options);

}  // namespace xendump::daemon
