// One domain of a simulated host as a process sees it: its immutable
// description (loaded once) and its memory. Its changing state lives in
// state.json (see host_store.hpp) and is passed in by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/host_spec.hpp"
#include "sim/host_store.hpp"
#include "sim/mapped_file.hpp"

namespace xendump::sim {

// What create derived for a domain beyond its spec (domain.json).
struct DomainDerived {
    uint64_t shared_info_mfn = 0;     // a frame Xen shares with the guest, in no extent
    std::vector<uint64_t> p2m_pfns;   // sorted: pages holding p2m structures (= overlay order)
    uint64_t entries_per_page = 0;    // PV: 512 or 1024
    uint64_t frame_list_list_mfn = 0; // PV tree root (0 when none)
    uint64_t top_table_mfn = 0;       // PV linear page-table root (0 when none)
    uint64_t max_pages = 0;
    nlohmann::json shared_info_arch;  // effective shared_info.arch values
};

nlohmann::json domain_record(const DomainSpec& spec, const DomainDerived& derived);

class SimDomain {
public:
    SimDomain(const HostPaths& paths, uint32_t domid);

    const DomainSpec& spec() const { return spec_; }
    const DomainDerived& derived() const { return derived_; }
    uint32_t domid() const { return spec_.domid; }
    // cr3 of the guest's top-level page table, 0 when none exists.
    uint64_t cr3() const;

    bool holds_p2m_structure(uint64_t pfn) const;
    // The pfn backed by `mfn` per the extents (ignoring ballooning).
    std::optional<uint64_t> pfn_of_mfn(uint64_t mfn) const;
    // The contents of `pfn` (a present pfn) into out[0..4096).
    void read_page(uint64_t pfn, std::byte* out) const;
    // True when read_page(pfn) gives zeros without reading anything (a zero
    // range, or zero fill outside the p2m's own pages): computed, not stored.
    bool reads_as_zero(uint64_t pfn) const;
    // Where read_page(pfn) would copy from when the page lies whole in the
    // domain's memory image (and is not zero, nor one of the p2m's own
    // pages): mapped there without a copy, as Xen maps a guest's frame into
    // the caller's address space. Null otherwise. Valid while this lives.
    const std::byte* page_in_place(uint64_t pfn) const;
    const std::vector<std::byte>& shared_info_page() const { return shared_info_; }
    // PV: pfn of the page holding p2m entry `pfn`, and the entry's byte offset there.
    std::pair<uint64_t, uint64_t> p2m_entry_location(uint64_t pfn) const;
    uint64_t overlay_offset(uint64_t structure_pfn) const;

private:
    bool in_zero_range(uint64_t pfn) const;

    DomainSpec spec_;
    DomainDerived derived_;
    std::vector<Extent> by_mfn_;
    std::vector<uint64_t> p2m_page_pfns_;
    // The spec's zero_ranges merged: sorted, disjoint, not adjacent (runs for util::run_holding).
    std::vector<PfnRange> zero_runs_;
    std::vector<std::byte> shared_info_;
    MappedFile overlay_;
    MappedFile image_;
};

}  // namespace xendump::sim
