// One vocabulary for the facts about a dump that several places record:
// the dump's NT_XEN_DOMAIN note (xen-dump-core(5)), the service's sidecar
// (DUMP.json), its journal entry (xen-dumpd(8)), the MATCH fields of
// xen-dumpctl list/info/verify/dmesg, and the --json output of xen-dumpctl
// list. Each place keeps the names it has always had (users' scripts and
// journal queries depend on them); this header says once which name each
// place gives each fact, and the code takes its names from here.
// doc/keys.md has the same table for readers.
#pragma once

#include "xendump/keyvalues.hpp"

namespace xendump::vocab {

// The name of one fact in each place; nullptr where that place does not record it.
struct Term {
    const char* note;     // NT_XEN_DOMAIN key (xendump::keys)
    const char* sidecar;  // key of the sidecar's JSON object
    const char* journal;  // journal field
    const char* match;    // xen-dumpctl MATCH field (FIELD=VALUE)
    const char* json;     // key of an entry of xen-dumpctl list --json
};

inline constexpr Term kDomid{keys::kDomid, "domid", "DOMID", "DOMID", "domid"};
inline constexpr Term kDomainName{keys::kName, "domain", "DOMAIN", "DOMAIN", "domain"};
inline constexpr Term kUuid{keys::kUuid, "uuid", "DOMAIN_UUID", "UUID", "uuid"};
inline constexpr Term kGuestType{keys::kType, "type", nullptr, "TYPE", "type"};
inline constexpr Term kReason{keys::kReason, "reason", "DUMP_REASON", "REASON", "reason"};
inline constexpr Term kPages{keys::kNrPages, "pages", nullptr, nullptr, "pages"};
inline constexpr Term kDumpPath{nullptr, "dump_file", "DUMP_PATH", "PATH", "path"};
inline constexpr Term kResult{nullptr, "result", "DUMP_RESULT", "RESULT", "result"};
inline constexpr Term kSizeOnDisk{nullptr, "bytes_on_disk", "DUMP_SIZE", nullptr, "bytes_on_disk"};
inline constexpr Term kDigests{nullptr, "digests", nullptr, "DIGESTS", "digests"};
inline constexpr Term kError{nullptr, "error", nullptr, nullptr, "error"};
inline constexpr Term kGuestPanic{nullptr, "guest_panic", "GUEST_PANIC", nullptr, "guest_panic"};
inline constexpr Term kGuestBacktrace{nullptr, "guest_backtrace", "GUEST_BACKTRACE", nullptr, "guest_backtrace"};
// A crash's signature (daemon/crash_signature.hpp): from the panic line and
// the backtrace's function names, so only where they are in clear.
inline constexpr Term kCrashSignature{nullptr, "crash_signature", "CRASH_SIGNATURE", "SIGNATURE", "crash_signature"};
inline constexpr Term kDmesgPath{nullptr, nullptr, "GUEST_DMESG_PATH", nullptr, "dmesg_path"};
// How the service wrote the dump (Format=, Compress=, DumpLevel=, xen-dumpd(8)):
// "v1" or "kdump"; a compact file's page compression and dump level applied.
// xen-dumpctl list --json reports them for every dump, from the sidecar or
// else from the file's own headers.
inline constexpr Term kFormat{nullptr, "format", "DUMP_FORMAT", nullptr, "format"};
inline constexpr Term kCompression{nullptr, "compression", "DUMP_COMPRESSION", nullptr, "compression"};
inline constexpr Term kDumpLevel{nullptr, "dump_level", "DUMP_LEVEL", nullptr, "dump_level"};
// A compact file's zero pages: those of its `pages` (its second bitmap, zero
// pages included) stored as its one shared zero page (DumpReader::zero_pages;
// xen-dumpctl estimate's zero_pages of the level). Absent (sidecar) or null
// (list --json) for v1 files.
inline constexpr Term kZeroPages{nullptr, "zero_pages", nullptr, nullptr, "zero_pages"};
// An encrypted dump (issue 33; xen-dump-core(5) "Encrypted dumps"): that it
// is, and to how many recipients (the sidecar and the journal say no more of
// them). list --json's keys are the reader's to add.
inline constexpr Term kEncrypted{nullptr, "encrypted", "DUMP_ENCRYPTED", nullptr, nullptr};
inline constexpr Term kRecipients{nullptr, "recipients", "DUMP_RECIPIENTS", nullptr, nullptr};
// A live dump (issue 35): LIVE= "precopy" (consistent, the guest paused for
// pause_usec microseconds at the end) or "inconsistent" (never paused);
// absent for a paused dump. The pre-copy's rounds, pages copied again and
// restarts (its guest's layout changed: absent when none).
inline constexpr Term kLive{keys::kLive, "live", "DUMP_LIVE", nullptr, nullptr};
inline constexpr Term kPauseUsec{keys::kPauseUsec, "pause_usec", "DUMP_PAUSE_USEC", nullptr, nullptr};
inline constexpr Term kLiveRounds{keys::kLiveRounds, "live_rounds", "DUMP_LIVE_ROUNDS", nullptr, nullptr};
inline constexpr Term kPagesRecopied{keys::kPagesRecopied, "pages_recopied", "DUMP_PAGES_RECOPIED", nullptr, nullptr};
inline constexpr Term kLiveRestarts{keys::kLiveRestarts, "live_restarts", "DUMP_LIVE_RESTARTS", nullptr, nullptr};

}  // namespace xendump::vocab
