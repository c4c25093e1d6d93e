// An in-test hypervisor for p2m discovery: machine frames owned by domains,
// page contents only where a test writes them (other frames read as zeros),
// and a builder that lays out a PV guest's p2m (tree and/or linear, 64- or
// 32-bit) in the guest's own frames, as Linux does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "xendump/error.hpp"
#include "xendump/hypervisor.hpp"
#include "xendump/page_source.hpp"

namespace xendump::test {

using Page = std::array<std::byte, 4096>;

class FakeHypervisor : public Hypervisor {
public:
    struct Domain {
        DomainInfo info;
        unsigned width = 8;
        uint64_t max_gpfn = 0;
        std::map<uint64_t, std::pair<uint64_t, uint64_t>> gfns;  // HVM: first gfn -> (mfn, count)
        std::set<uint64_t> broken;  // HVM: populated gfns whose page is broken (no mapping, type BROKEN)
        // HVM: populated gfns holding one of Xen's own pages (shared_info, a
        // grant frame): they map, but their type is XTAB (absent).
        std::set<uint64_t> xen_pages;
    };

    // Frames mfn … mfn+count-1 now belong to `domid`.
    void own(uint32_t domid, uint64_t mfn, uint64_t count);
    // HVM: gfns gfn … gfn+count-1 are populated, backed by mfn … (owned).
    void populate(uint32_t domid, uint64_t gfn, uint64_t mfn, uint64_t count);
    Domain& add_domain(uint32_t domid, bool hvm, unsigned width);
    Page& page(uint64_t mfn);  // writable contents, created zeroed
    void write_u64(uint64_t mfn, size_t offset, uint64_t value);
    void write_word(uint64_t mfn, size_t index, unsigned width, uint64_t value);

    std::map<uint32_t, Domain> domains;
    uint64_t map_calls = 0;
    uint64_t mapped_frames = 0;
    uint64_t largest_batch = 0;
    uint64_t type_calls = 0;   // gfn_types() calls
    uint64_t typed_gfns = 0;   // gfns they asked about
    int refuse_types = 0;      // an errno: gfn_types() refuses with it (probing falls back to mapping)

    // Hypervisor
    std::string describe() const override { return "fake"; }
    std::vector<DomainInfo> list_domains() override;
    std::optional<DomainInfo> domain_info(uint32_t domid) override;
    std::string domain_name(uint32_t) override { return {}; }
    unsigned guest_width(uint32_t domid) override { return domains.at(domid).width; }
    uint64_t maximum_gpfn(uint32_t domid) override { return domains.at(domid).max_gpfn; }
    std::optional<std::vector<std::byte>> vcpu_context(uint32_t, uint32_t) override { return std::nullopt; }
    std::unique_ptr<ForeignMapping> map_foreign(uint32_t domid, std::span<const uint64_t> frames) override;
    void pause(uint32_t) override {}
    void unpause(uint32_t) override {}
    void destroy(uint32_t) override {}
    format::XenVersionDesc xen_version() override { return {}; }
    std::unique_ptr<DomainWatch> watch_domains() override { return nullptr; }
    std::vector<GfnType> gfn_types(uint32_t domid, std::span<const uint64_t> gfns) override;

private:
    std::optional<uint32_t> owner_of(uint64_t mfn) const;
    std::optional<uint64_t> translate(const Domain& d, uint64_t gfn) const;
    std::map<uint64_t, std::pair<uint64_t, uint32_t>> owned_;  // first mfn -> (count, domid)
    std::map<uint64_t, std::unique_ptr<Page>> pages_;
};

enum class P2mLayout { tree, linear, both };

// A PV guest: extents [pfn, mfn, count], a p2m of `p2m_size` entries laid
// out in the guest's highest present frames.
struct PvGuestSpec {
    uint32_t domid = 1;
    unsigned width = 8;
    uint64_t p2m_size = 0;
    P2mLayout layout = P2mLayout::tree;
    std::vector<std::array<uint64_t, 3>> extents;
    std::vector<std::pair<uint64_t, uint64_t>> p2m_overrides;  // pfn -> raw value (before layout)
    uint64_t shared_info_mfn = 0x7fff000;
};

struct PvGuest {
    std::vector<PageEntry> expected;  // extents, ascending pfn
    uint64_t shared_info_mfn = 0;
    uint64_t frame_list_list = 0;
    uint64_t p2m_cr3 = 0;
    uint64_t p2m_vaddr = 0;
    uint64_t top_table_mfn = 0;
    std::vector<uint64_t> p2m_page_mfns;           // [j]
    std::vector<uint64_t> frame_list_mfns;         // tree
    std::map<unsigned, std::vector<uint64_t>> tables;  // linear: level -> table mfns
    uint64_t arch_offset = 0;                      // of shared_info.arch
};

// Builds the guest in `hv` and writes its shared_info (max_pfn = p2m_size).
PvGuest build_pv_guest(FakeHypervisor& hv, const PvGuestSpec& spec);

// Rewrites one shared_info.arch field (index 0 max_pfn … 5 p2m_generation).
void set_arch_field(FakeHypervisor& hv, const PvGuest& g, unsigned width, unsigned index, uint64_t value);

}  // namespace xendump::test
