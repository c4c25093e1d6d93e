// Internals of p2m discovery shared by the tree walk, the linear walk, the
// leaf reader and the HVM prober.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/util.hpp"
#include "p2m/p2m.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump::p2m_detail {

inline constexpr uint64_t kNoFrame = ~uint64_t{0};
// Frames per foreign-mapping call: large enough to amortise the hypercall,
// small enough to keep the mapped window modest (32 MiB).
inline constexpr size_t kMapBatch = 8192;

// shared_info.arch (xen/include/public/arch-x86/xen.h, struct
// arch_shared_info): six guest-width words.
struct ArchSharedInfo {
    uint64_t max_pfn = 0;
    uint64_t frame_list_list = 0;  // pfn_to_mfn_frame_list_list (an mfn)
    uint64_t nmi_reason = 0;
    uint64_t p2m_cr3 = 0;
    uint64_t p2m_vaddr = 0;
    uint64_t p2m_generation = 0;
};

// `page` is the 4096-byte shared_info; `width` 4 or 8.
ArchSharedInfo parse_arch_shared_info(std::span<const std::byte> page, unsigned width);

// The frames a domain can own: max(tot_pages, max_pages) + shr_pages (Xen
// refuses to give it more than max_pages; shared pages are left out of
// tot_pages), at most 2^40. A PV guest's p2m names no more frames that are
// its own (foreign and identity entries carry Linux's FOREIGN_FRAME_BIT or
// IDENTITY_FRAME_BIT and are no frames: plausible_frame()).
uint64_t domain_frames(const DomainInfo& info);

// Reads a little-endian word of `width` bytes at index `i` of a page.
uint64_t read_word(const std::byte* page, size_t i, unsigned width);

// One anomaly kind, counted, with the first occurrence kept for the message.
struct AnomalyCount {
    uint64_t count = 0;
    std::string first;
    void add(const std::function<std::string()>& describe) {
        if (count++ == 0) first = describe();
    }
};

// A value that can name a machine frame: below 2^40 (x86-64 physical
// addresses have 52 bits); for 32-bit guests below 2^30, as Linux keeps
// bits 31 and 30 of a p2m entry for FOREIGN_FRAME_BIT and
// IDENTITY_FRAME_BIT (arch/x86/include/asm/xen/page.h). Zero is Xen's.
inline bool plausible_frame(uint64_t value, unsigned width) {
    return value != 0 && value < (width == 8 ? uint64_t{1} << 40 : uint64_t{1} << 30);
}
// ~0 at guest width: INVALID_P2M_ENTRY, an ordinary hole.
inline bool invalid_p2m_entry(uint64_t value, unsigned width) {
    return value == (width == 8 ? ~uint64_t{0} : 0xffffffffu);
}

// State of one discovery run.
struct Walk {
    Hypervisor& hv;
    uint32_t domid;
    unsigned width;      // guest width in bytes
    uint64_t p2m_size;   // pfns examined
    std::string object;  // "domain N"
    // Which role each structure mfn played (frame list list, frame list,
    // L4…L1 table, p2m page): one mfn in two roles is a loop.
    std::unordered_map<uint64_t, std::string_view> roles;
    AnomalyCount unmappable_structure;  // tables or frame lists that did not map
    AnomalyCount bad_structure_entry;   // table entries with impossible values
    // The frames the domain can own (domain_frames()): a p2m entry naming a
    // frame beyond as many is a lie (EntryReader), never memory of ours.
    uint64_t frames_owned = UINT64_MAX;

    bool plausible_mfn(uint64_t value) const { return plausible_frame(value, width); }
    bool invalid_entry(uint64_t value) const { return invalid_p2m_entry(value, width); }
    uint64_t entries_per_page() const { return format::kPageSize / width; }
    uint64_t p2m_pages() const { return (p2m_size + entries_per_page() - 1) / entries_per_page(); }
    // Records `mfn` in `role`; throws Error when it already has another role.
    void claim(uint64_t mfn, std::string_view role);
};

// Maps `frames` (no kNoFrame) in batches of at most `batch` and calls
// visit(index of the batch's first frame, mapping) for each batch.
void map_batches(Hypervisor& hv, uint32_t domid, std::span<const uint64_t> frames, size_t batch,
                 const std::function<void(size_t, const ForeignMapping&)>& visit);

// Copies of the distinct pages among `mfns` that mapped; the others are
// absent from the result (counted in walk.unmappable_structure).
std::unordered_map<uint64_t, std::vector<std::byte>> read_structure_pages(Walk& walk,
                                                                         std::span<const uint64_t> mfns,
                                                                         std::string_view role);

// The mfn of each p2m page (index i holds pfns i*fpp …), kNoFrame where the
// structure has none. Throw Error for walks that cannot start.
std::vector<uint64_t> tree_p2m_frames(Walk& walk, uint64_t frame_list_list);
std::vector<uint64_t> linear_p2m_frames(Walk& walk, uint64_t p2m_cr3, uint64_t p2m_vaddr);

// Reads the p2m pages and fills map.pages (and map.p2m_frames, warnings).
void read_p2m_entries(Walk& walk, std::span<const uint64_t> p2m_frames, const P2mOptions& options,
                      P2mMap& map);

// p2m pages per mapping call and per window: 512 pages hold 256Ki (64-bit)
// or 512Ki (32-bit) entries.
inline constexpr size_t kP2mPagesPerChunk = 512;

// The p2m pages' entries a chunk of p2m pages at a time, in pfn order: holes,
// implausible values and (verify_frames) frames the domain does not own are
// left out and counted; duplicate frames are not looked at here. Once as
// many plausible entries were passed on as the domain can own frames
// (Walk::frames_owned), the p2m lies: every later one is left out and
// counted too, so that a guest whose frame list names one leaf page of
// scattered frames again and again costs no more than its own size.
class EntryReader {
public:
    EntryReader(Walk& walk, std::span<const uint64_t> frames, const P2mOptions& options);
    // Claims the leaf frames in `walk` (a loop is an Error) and lists them.
    void claim_leaves(std::vector<uint64_t>& p2m_frames);
    // Appends the next chunk's present pages to `out`; false when done.
    bool read_next(std::vector<PageEntry>& out);
    // The pfns examined so far (a chunk's p2m pages hold them): progress.
    uint64_t examined() const { return std::min<uint64_t>(next_ * walk_.entries_per_page(), walk_.p2m_size); }
    void add_warnings(std::vector<std::string>& warnings) const;

private:
    Walk& walk_;
    std::span<const uint64_t> frames_;
    const P2mOptions& options_;
    size_t next_ = 0;
    uint64_t kept_ = 0;  // plausible entries passed on, at most walk_.frames_owned
    AnomalyCount unmappable_, implausible_, not_owned_, beyond_owned_;
};

// Drops every entry whose gmfn a lower pfn already names (in memory).
void drop_duplicate_frames(std::vector<PageEntry>& pages, AnomalyCount& duplicate);
std::string duplicate_warning(const AnomalyCount& duplicate);

// HVM/PVH: whether `gfn` lies in a device window discovery never dumps (the
// VGA hole, the MMIO window below 4 GiB).
bool in_device_window(uint64_t gfn);

// HVM/PVH: probes gfns 0 … p2m_size-1 and fills map.pages (and its warnings).
void probe_translated(Hypervisor& hv, const DomainInfo& info, uint64_t p2m_size, P2mMap& map);

// HVM/PVH probing a window of gfns at a time: the hypervisor's page types
// (Hypervisor::gfn_types, kMapBatch gfns a call), so that no page is mapped
// before the page pass maps it to read it; only the absent gfns of short
// holes in RAM are mapped, for Xen's pages the guest put there
// (translated.cpp). When the hypervisor refuses the types (an Error with an
// errno), the gfns are mapped instead, kMapBatch a call, as before page types
// were asked: each present page is then mapped twice in a dump, and a warning
// says why.
class TranslatedProber {
public:
    TranslatedProber(Hypervisor& hv, const DomainInfo& info, uint64_t p2m_size)
        : hv_(hv), domid_(info.domid), size_(p2m_size), owned_(info.tot_pages + info.shr_pages) {}
    // Appends the populated gfns among the next `gfns` probed to `out`;
    // false when every gfn was probed.
    bool read_next(std::vector<PageEntry>& out, uint64_t gfns);
    // The gfns examined so far (skipped device holes included): progress.
    uint64_t examined() const { return next_; }
    // The broken pages left out, and the fallback to mapping, one line each.
    void add_warnings(std::vector<std::string>& warnings) const;

private:
    void probe(const std::vector<uint64_t>& gfns, std::vector<PageEntry>& out);
    // Asks the types of `gfns` and hands them to `use`; false when the
    // hypervisor refuses (an Error with an errno: refused_ says why).
    bool with_types(const std::vector<uint64_t>& gfns, const std::function<void(const std::vector<GfnType>&)>& use);
    void typed(const std::vector<uint64_t>& gfns, const std::vector<GfnType>& types, std::vector<PageEntry>& out);
    void map_probe(std::span<const uint64_t> gfns, std::vector<PageEntry>& out);
    void count_device_windows();

    Hypervisor& hv_;
    uint32_t domid_;
    uint64_t size_, next_ = 0;
    // The gfns that can be typed present (the domain's pages, those it
    // shares): once as many are found, the scan ends after a last tail.
    // 0: no such end (the types were refused).
    uint64_t owned_;
    uint64_t found_ = 0;  // gfns typed present so far, the device windows' included
    bool windows_counted_ = false;
    uint64_t stop_at_ = UINT64_MAX;  // set when found_ reaches owned_
    std::string refused_;  // why page types were refused: probing by mapping since
    AnomalyCount broken_;
    bool in_ram_ = false;         // a present (or broken) gfn came, and no long gap since
    std::vector<uint64_t> hole_;  // the absent gfns since it: mapped if RAM follows
};

// The steps of discover_p2m, for the whole walk and the windowed one.
struct PvStart {
    Walk walk;
    std::vector<uint64_t> frames;  // leaf p2m frames, kNoFrame for holes
    ArchSharedInfo arch;
};
PvStart start_pv(Hypervisor& hv, const DomainInfo& info, P2mMap& map);
void finish_pv(const PvStart& st, const DomainInfo& info, P2mMap& map);
void start_translated(Hypervisor& hv, const DomainInfo& info, P2mMap& map);
// Error "no present page found" when pages == 0.
void check_not_empty(const P2mMap& map, uint64_t pages, uint32_t domid);

using util::hex;
// "N <what> (first: …); <consequence>"
std::string counted(const AnomalyCount& a, const std::string& what, const std::string& consequence);

}  // namespace xendump::p2m_detail
