// Which dumps a command of xen-dumpctl acts on, as coredumpctl(1) selects
// core dumps: MATCH operands and the options -S/--since, -U/--until,
// -r/--reverse, -1 and -n N, over the dumps of the dump directory (their
// sidecars, and for fields a sidecar lacks, the NT_XEN_DOMAIN note of the
// dump file).
//
// A MATCH is one of
//   PATH          an existing file, or any operand holding '/': that file
//                 (when every MATCH is one, info/verify/dmesg/debug open the
//                 files as given, without the dump directory)
//   NAME.core     a dump's file name in the dump directory (FILE=NAME.core)
//   DOMID         decimal digits (DOMID=N)
//   UUID          8-4-4-4-12 hexadecimal digits (UUID=...)
//   FIELD=VALUE   a field of the sidecar or of the dump's domain note
//   NAME          anything else: the domain's name (DOMAIN=NAME)
// MATCHes of one field are alternatives, MATCHes of different fields must
// all hold (as journalctl combines matches).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dump_dir.hpp"
#include "options.hpp"
#include "service_options.hpp"

namespace xendump::ctl {

// The paragraph of --help that describes MATCH (shared by the commands; the
// options are in option_tables.hpp).
extern const char* const kSelectionHelp;

struct Match {
    std::string field;  // upper case: PATH, FILE, DOMAIN, DOMID, UUID, TYPE, REASON, RESULT, ... or a note key
    std::string value;
};
// Throws Error for a FIELD=VALUE whose FIELD is not a field name.
Match classify_match(const std::string& operand);

struct Selection {
    std::vector<Match> matches;
    std::optional<int64_t> since, until;  // unix seconds, inclusive
    bool reverse = false;
    std::optional<size_t> latest;  // -1, -n N: only the latest N
    bool any_option = false;       // one of -S -U -1 -n given
    bool utc = false;              // --utc: times read and shown in UTC (else local time)
};

// The selection from parsed arguments; `now` (unix seconds) anchors the
// relative times. Returns a usage error message, "" when fine.
std::string selection_from_args(const ParsedArgs& p, int64_t now, Selection& out);

// Whether every MATCH is a PATH (the files are then used as given).
bool only_paths(const Selection& s);

// A recorded dump whose file is gone: its sidecar says the dump was written
// (result ok) and the file is not there.
bool is_missing(const daemon::DumpEntry& e);
bool is_present(const daemon::DumpEntry& e);

// The value of FIELD for a dump: from its sidecar (DOMAIN, DOMID, UUID, TYPE,
// REASON, RESULT, DIGESTS, FILE, PATH), else from its domain note
// (NAME, DOMID, UUID, TYPE, REASON, KERNEL, TIME, WRITER, ...).
std::optional<std::string> dump_field(const daemon::DumpEntry& e, const std::string& field);

// The entries (oldest first, as scan_dump_dir gives them) that the selection
// picks, in the order to show them (newest first with -r).
std::vector<daemon::DumpEntry> select_dumps(const std::vector<daemon::DumpEntry>& entries, const Selection& s);

// The dump files a file command acts on. With only PATH matches: those files.
// Otherwise the selected dumps of the dump directory that have a file: all of
// them (`all`, verify) or the latest one; `missing` lists the selected dumps
// whose file is gone. Throws Error when nothing is selected.
struct Targets {
    std::vector<std::filesystem::path> files;
    std::vector<std::filesystem::path> missing;
};
Targets resolve_targets(ServiceArgs& sa, const Selection& s, bool all);

}  // namespace xendump::ctl
