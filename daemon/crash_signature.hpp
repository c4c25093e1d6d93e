// A crash's signature (issue 34 item 5): what stays the same when one crash
// happens again, on another host, under another build of the same kernel —
// the panic message without its numbers, addresses, pids and CPU ids, and
// the function names of the crashed vcpu's top frames without their offsets
// — hashed into 16 hex digits that group dumps across a fleet (list's
// SIGNATURE= and its crash_signature, the journal's CRASH_SIGNATURE=).
#pragma once

#include <optional>
#include <string>

#include "sidecar.hpp"

namespace xendump::daemon {

// The frames a signature keeps: the innermost reliable ones.
inline constexpr size_t kSignatureFrames = 6;

// The text hashed: the normalised panic line, then one function name a line.
// Empty without a panic line (a dump on request, or a log not read).
std::string crash_signature_text(const std::optional<std::string>& panic,
                                 const std::optional<GuestBacktrace>& backtrace);

// The first 8 bytes of the text's SHA-256, in hex; nullopt without a panic line.
std::optional<std::string> crash_signature(const std::optional<std::string>& panic,
                                           const std::optional<GuestBacktrace>& backtrace);
std::optional<std::string> crash_signature(const Sidecar& s);

}  // namespace xendump::daemon
