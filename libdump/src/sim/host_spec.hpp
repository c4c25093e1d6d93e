// The simulated host's spec file (simulated-host.md, "Spec file"): parsed,
// validated and completed with defaults. The same types describe a host
// stored in DIR (each domain's normalized spec is kept as JSON there).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/sim_writer.hpp"
#include "xendump/format.hpp"

namespace xendump::sim {

using format::kPageSize;

using format::GuestType;
enum class P2mFormat { tree, linear, both };
enum class FillKind { pattern, zero, image };
enum class InitialState { running, paused, crashed, shutdown };

// pfns pfn … pfn+count−1 are present, backed by mfns mfn … mfn+count−1.
struct Extent {
    uint64_t pfn = 0;
    uint64_t mfn = 0;
    uint64_t count = 0;
};

struct PfnRange {
    uint64_t pfn = 0;
    uint64_t count = 0;
};

// Raw values written into shared_info.arch after the p2m is built.
struct SharedInfoOverrides {
    std::optional<uint64_t> max_pfn;
    std::optional<uint64_t> pfn_to_mfn_frame_list_list;
    std::optional<uint64_t> p2m_cr3;
    std::optional<uint64_t> p2m_vaddr;
    std::optional<uint64_t> p2m_generation;
    bool empty() const {
        return !max_pfn && !pfn_to_mfn_frame_list_list && !p2m_cr3 && !p2m_vaddr && !p2m_generation;
    }
};

struct DomainSpec {
    uint32_t domid = 0;
    std::string name;
    std::array<uint8_t, 16> uuid{};
    GuestType type = GuestType::pv;
    unsigned guest_width = 8;  // bytes; always 8 for HVM/PVH
    unsigned vcpus = 1;
    uint64_t p2m_size = 0;
    P2mFormat p2m_format = P2mFormat::tree;
    std::vector<Extent> extents;  // sorted by pfn, disjoint
    std::optional<uint64_t> p2m_pages_at;
    FillKind fill = FillKind::pattern;
    std::filesystem::path image;  // absolute, when fill == image
    std::vector<PfnRange> zero_ranges;
    InitialState state = InitialState::running;
    std::vector<std::pair<uint64_t, uint64_t>> p2m_overrides;  // [pfn, raw value]
    SharedInfoOverrides shared_info_overrides;
    uint64_t per_call_us = 0;
    uint64_t per_page_ns = 0;
    // Log-dirty (simulated-host.md "Log-dirty and the writer"): PCI devices
    // passed through (log-dirty refused), a dying domain, the guest's writer.
    bool passthrough = false;
    bool dying = false;
    WriterSpec writer;

    bool is_pv() const { return type == GuestType::pv; }
    uint64_t present_pages() const;
    // The extent holding `pfn`, or nullptr for a hole.
    const Extent* extent_of_pfn(uint64_t pfn) const;
};

struct HostSpec {
    std::string xen_version = "4.17.0";
    // Built with CONFIG_SHADOW_PAGING: PV guests can be put in log-dirty
    // mode. Debian 12's Xen 4.17 is built without it (the default).
    bool shadow_paging = false;
    std::vector<DomainSpec> domains;  // sorted by domid
};

// Parses and validates a spec. `base_dir` resolves relative image paths;
// `object` (the spec file's path) names the file in errors.
// `first_free_mfn`: domains without extents are placed at or above it (a
// spec added to a host: above the host's frames).
HostSpec parse_host_spec(const nlohmann::json& spec, const std::filesystem::path& base_dir,
                         const std::string& object, uint64_t first_free_mfn = 0);
HostSpec load_host_spec_file(const std::filesystem::path& path, uint64_t first_free_mfn = 0);
// Machine frames belong to one domain only (simulated-host.md, "extents"):
// Error naming `object` and the frames given twice.
void check_machine_frames(const std::vector<DomainSpec>& domains, const std::string& object);

// One domain as a normalized spec object (every key present, defaults filled);
// parse_host_spec() accepts it back unchanged.
nlohmann::json domain_spec_to_json(const DomainSpec& d);

std::string p2m_format_name(P2mFormat f);
std::string initial_state_name(InitialState s);
std::array<uint8_t, 16> parse_uuid(const std::string& text, const std::string& where,
                                   const std::string& object);

}  // namespace xendump::sim
