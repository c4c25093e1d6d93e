// NT_XEN_DOMAIN: ordered KEY=value lines. Also the vocabulary shared with
// sidecars, journal fields and --json output.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xendump {

class KeyValues {
public:
    void set(std::string key, std::string value);  // replaces an existing key, keeps order
    std::optional<std::string> get(std::string_view key) const;
    bool contains(std::string_view key) const { return get(key).has_value(); }
    const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

    std::string serialize() const;  // "KEY=value\n" each; values must not hold '\n'
    // Lenient parse: lines without '=' are skipped; NULs at the end are ignored.
    static KeyValues parse(std::string_view text);

private:
    std::vector<std::pair<std::string, std::string>> items_;
};

// Standard keys of NT_XEN_DOMAIN (xen-dump-core(5) "NT_XEN_DOMAIN keys").
namespace keys {
inline constexpr const char* kDomid = "DOMID";
inline constexpr const char* kName = "NAME";
inline constexpr const char* kUuid = "UUID";
inline constexpr const char* kType = "TYPE";
inline constexpr const char* kGuestWidth = "GUEST_WIDTH";
inline constexpr const char* kMaxPfn = "MAX_PFN";
inline constexpr const char* kNrPages = "NR_PAGES";
inline constexpr const char* kVcpus = "VCPUS";
inline constexpr const char* kP2m = "P2M";
inline constexpr const char* kReason = "REASON";
inline constexpr const char* kPaused = "PAUSED";
inline constexpr const char* kTime = "TIME";
inline constexpr const char* kWriter = "WRITER";
inline constexpr const char* kSource = "SOURCE";
inline constexpr const char* kLayout = "LAYOUT";
inline constexpr const char* kSourceId = "SOURCE_ID";  // converted files: size, mtime, digest of the source
inline constexpr const char* kKernel = "KERNEL";  // the guest kernel's release, a kernel::is_release_name
// A release the guest reported that is no release name (kernel::is_release_name),
// escaped (escape_text): shown marked untrusted, never used to build a path.
inline constexpr const char* kKernelUntrusted = "KERNEL_UNTRUSTED";
inline constexpr const char* kKernelOffset = "KERNELOFFSET";
// Live dumps (issue 35): LIVE=precopy (consistent: pre-copy, the guest
// paused for PAUSE_USEC microseconds) or LIVE=inconsistent (never paused,
// pages of different instants); absent: a paused dump (PAUSED=1) or an old file.
inline constexpr const char* kLive = "LIVE";
inline constexpr const char* kPauseUsec = "PAUSE_USEC";
inline constexpr const char* kLiveRounds = "LIVE_ROUNDS";        // rounds of re-copying while the guest ran
inline constexpr const char* kLiveRestarts = "LIVE_RESTARTS";    // pre-copies started over (the layout changed)
inline constexpr const char* kPagesRecopied = "PAGES_RECOPIED";  // pages copied again after the first pass
}  // namespace keys

}  // namespace xendump
