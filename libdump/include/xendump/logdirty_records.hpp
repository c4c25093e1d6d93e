// Records of the log-dirty mode that consistent live dumps turned on (issue
// 35 item 1). Log-dirty mode stays on until someone turns it off: a dumper
// killed in its pre-copy (SIGKILL, a crash of the service) leaves the guest
// slower and its migration refused ("log-dirty already in use"). So while
// a pre-copy has it on, it keeps a record, DIR/.xen-dumpd-logdirty-DOMID.json
// (DumpOptions::Precopy::records; xen-dumpd uses its dump directory): the
// domain's id and uuid, the dumper's pid and start time, and whether the
// guest's device model was told to log its writes too. The record is
// written only once Xen has turned log-dirty on for this dump, and removed
// once it is off again.
//
// release_stale_logdirty() turns off what a record says its dumper turned
// on, when that dumper is gone; and only that: a record whose process still
// runs is left alone; a domain that is gone or whose uuid is not the
// record's (its id reused) is not touched, its record removed. Log-dirty
// on without a record is another user's (a migration, a checkpoint) and is
// never turned off.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace xendump {

class Hypervisor;

// The records in `dir` (of domain `domid` only, if given) whose dumper is
// gone: what each said was on is turned off and the record removed. One
// line for each record handled, saying what was done (for the log); a
// record that cannot be handled (Xen refuses, the record is unreadable)
// is kept and its line says why. Nothing when `dir` has no records.
std::vector<std::string> release_stale_logdirty(Hypervisor& hv, const std::filesystem::path& dir,
                                                std::optional<uint32_t> domid = std::nullopt);

}  // namespace xendump
