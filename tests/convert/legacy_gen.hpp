// Synthetic guests and the legacy xc_core files Xen <= 3.0.4 would have
// written for them, in every variant of doc/legacy-formats.md 1 and for both
// tool widths. A guest has pfn->mfn extents, pattern pages, and optionally its
// own p2m frame-list tree and page tables inside its memory, so the converter
// has to recover the pfns the way it would from a real dump.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

namespace xendump::test::legacy_gen {

inline constexpr uint64_t kNoMfn = ~uint64_t{0};

struct GuestSpec {
    unsigned width = 8;          // guest (= tool) width: 4 or 8
    uint64_t nr_pfns = 700;      // p2m size
    uint64_t seed = 1;
    std::vector<uint64_t> hole_pfns;  // pfns without a page
    bool p2m_tree = true;        // frame-list tree (root, middles) in guest memory
    bool page_tables = false;    // page tables mapping phys_to_machine_mapping (System.map path)
    // Leaves of the p2m whose whole pfn range was ballooned out (no page):
    // each one's page holds nothing but ~0 (xenolinux's contiguous array).
    std::vector<uint64_t> ballooned_leaves = {};
    // With ballooned_leaves: the frame lists point every such leaf at one
    // shared all-~0 page instead (pvops' p2m_missing).
    bool shared_missing_leaf = false;
};

struct Guest {
    unsigned width = 8;
    std::vector<uint64_t> mfn_of_pfn;                 // kNoMfn for holes
    std::vector<std::vector<std::byte>> page_of_pfn;  // empty for holes
    uint64_t root_mfn = kNoMfn;
    uint64_t missing_leaf_mfn = kNoMfn;  // the shared all-~0 leaf, when there is one
    uint64_t cr3_mfn = kNoMfn;
    uint64_t p2m_symbol_va = 0;  // address of the pointer `phys_to_machine_mapping`
    uint64_t present() const;
};

Guest make_guest(const GuestSpec& spec);

enum class Variant {
    pv_page_list,   // 1.1: MFNs in shuffled (allocation) order
    hvm_pfn_order,  // 1.2: magic 0xf00febed, VGCF_HVM_GUEST, slot i = pfn i (hole rule), ~0 = not populated
    hvm_page_list,  // 1.3: magic 0xf00febee
    pv_pfn_order,   // 1.4: slot i = pfn i, index = MFN, ~0 = hole
    ocaml_damaged,  // offsets swapped, no index, pages in pfn order
};
const char* to_string(Variant v);

struct FileSpec {
    Variant variant = Variant::pv_page_list;
    unsigned tool_width = 8;   // 4: 2800-byte contexts; 8: 5168
    unsigned entry_size = 0;   // 0: tool width (8 with tool_width 4 = the development window)
    unsigned nr_vcpus = 1;
    uint64_t shuffle_seed = 7;
    // pv_page_list only. false: slots in a random order (the hardest case).
    // true: the order Xen's page list has after boot and some ballooning:
    // the domain builder gave pfn i the i-th page of the list, then a tenth
    // of the pages, chosen at random, went back to Xen and returned at the
    // list's end in random order.
    bool allocation_order = false;
    bool round_pages_offset = true;
};

std::vector<std::byte> make_file(const Guest& guest, const FileSpec& spec);

// The System.map line for the guest's phys_to_machine_mapping.
std::string system_map_text(const Guest& guest);

// A large legacy file written straight to disk, sparse (issue 19's tests
// and benchmarks): a 64-bit PV guest of `nr_pfns` pages (at most 2^27) in
// page-list order, tool width 8, one vcpu. Pfn p is machine frame
// sparse_mfn(p) (extents of 64 frames, gaps of 3); every tenth pfn (p % 10 ==
// 7) went back to Xen and sits at the end of the list, in descending pfn
// order, the others in pfn order. The p2m frame-list tree is in the guest's
// top pfns; pfns p % 4096 == 1 below it hold pattern pages; every other page
// is zero and left as a hole, so a 256 GiB guest writes about 0.5 GiB.
uint64_t sparse_mfn(uint64_t pfn);
// Pfn `pfn`'s page of such a guest: false (and `page` untouched) for a zero page.
bool sparse_page(uint64_t nr_pfns, uint64_t pfn, std::byte* page);
void write_sparse_pv_page_list(const std::filesystem::path& path, uint64_t nr_pfns);

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes);

}  // namespace xendump::test::legacy_gen
