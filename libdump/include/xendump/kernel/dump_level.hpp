// Dump levels with makedumpfile's meaning: which guest pages a filtered dump
// keeps, decided per pfn from the guest kernel's own `struct page` array as
// its VMCOREINFO describes it (no vmlinux needed).
//
// Level bits (makedumpfile -d): 1 zero pages, 2 non-private cache, 4 private
// cache, 8 user data, 16 free pages; 31 excludes all five classes.
//
// The rules follow makedumpfile 1.7.2's __exclude_unnecessary_pages (facts
// only; see dump_level.cpp for each): SPARSEMEM / SPARSEMEM_EXTREME
// mem_section roots (SYMBOL(mem_section), LENGTH(mem_section),
// SIZE(mem_section), NUMBER(SECTION_SIZE_BITS), NUMBER(MAX_PHYSMEM_BITS)),
// each struct page's flags, _mapcount, mapping, private and compound fields at
// the OFFSET()s VMCOREINFO gives, PG_* numbers, PAGE_BUDDY_MAPCOUNT_VALUE,
// PAGE_OFFLINE_MAPCOUNT_VALUE, HUGETLB_PAGE_DTOR. struct pages are read
// through the guest's own page tables (a PV guest's hold machine frames:
// translated through the dump's pfn->gmfn table).
//
// Pages that analysis needs are never excluded as cache, user data, free,
// offline or hwpoison pages, whatever their struct page says (a corrupt or
// hostile guest cannot hide them): every page-table page reached from the
// kernel's top table (init_top_pgt), the kernel image's sections that stay in
// use after boot, found by its kallsyms (text [_text, _etext), rodata
// [__start_rodata, __end_rodata), data [_sdata, _edata), bss [__bss_start,
// __bss_stop) less the unused decrypted tail; the gaps between them, the init
// sections and the unused brk are freed at boot and reused like any page),
// every kernel-image SYMBOL() of VMCOREINFO, the pages of the struct page
// array read, the pages the printk buffer occupies (every page the log
// reader touches), each vcpu's kernel stack (the 16 KiB THREAD_SIZE block
// around its stack pointer), and pfns the caller names (a PV guest's p2m
// frames). On a healthy guest none of them matches a rule (0 protected pages
// on the fixtures' and the lab's PV, PVH and HVM guests). Such a page that is all
// zero is still a zero page under bit 1: a filtered format records it as a
// zero page (makedumpfile's kdump format keeps it in its bitmap with the
// shared zero page), nothing is lost.
//
// A guest without a usable VMCOREINFO gets level 1 at most (only zero pages
// can be recognised without the kernel's structures), and the result says so.
//
// Everything read from the guest is untrusted: every section, pointer and
// order is bounds-checked, a page is examined at most once per pass, ranges
// are clipped to the dump's pfns, compound orders above 18 (1 GiB) are
// invalid, the page-table walk visits each table page once. Memory: the
// result is a PfnBitmap (a bit per pfn, of which at most 256 KiB in memory,
// the rest in a temporary file; all-zero and all-one blocks of 64 Ki pfns
// take only 8 bytes of bookkeeping, 32 KiB per TiB of guest); while
// classifying, four of them (present, protected, struct-page pages, result;
// five during the table walk): about 1 MiB whatever the guest's size.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/virtual_memory.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/page_source.hpp"

namespace xendump::kernel {

inline constexpr unsigned kExcludeZero = 1, kExcludeCache = 2, kExcludeCachePrivate = 4, kExcludeUserData = 8,
                          kExcludeFree = 16;
inline constexpr unsigned kMaxDumpLevel = 31;

// One bit per pfn in [0, size), in memory that does not grow with `size`
// (issue 19): blocks of kBlockBits bits, at most kCachedBlocks of them in
// memory (256 KiB), the others in an unnamed temporary file (TMPDIR, else
// /var/tmp; see io/temp_file.hpp), written back when evicted. A block whose
// bits are all zero or all one has no storage at all, so a bitmap of a
// guest's present pfns, or of its kept ones, is mostly bookkeeping: 8 bytes
// per block (256 MiB of guest), 32 KiB per TiB.
//
// Const members (test, count, next_set, and reading `other` and `mask` in
// merge_masked) may be called from several threads at once: the cache has a
// mutex. The others need the bitmap to themselves, as a std::vector would.
class PfnBitmap {
public:
    static constexpr uint64_t kBlockBits = uint64_t{1} << 16;  // 8 KiB of bits
    static constexpr size_t kCachedBlocks = 32;

    PfnBitmap() noexcept;
    explicit PfnBitmap(uint64_t size);
    PfnBitmap(const PfnBitmap& other);
    PfnBitmap(PfnBitmap&& other) noexcept;
    PfnBitmap& operator=(const PfnBitmap& other);
    PfnBitmap& operator=(PfnBitmap&& other) noexcept;
    ~PfnBitmap();

    uint64_t size() const;
    bool test(uint64_t pfn) const;
    void set(uint64_t pfn);
    void reset(uint64_t pfn);
    // Sets the bits of [first, end) (clipped to size()).
    void set_range(uint64_t first, uint64_t end);
    uint64_t count() const;
    // The first set bit at or after `pfn`; size() when there is none.
    uint64_t next_set(uint64_t pfn) const;
    // this |= other & mask (all three the same size).
    void merge_masked(const PfnBitmap& other, const PfnBitmap& mask);
    // What the bitmap holds in memory now: its cached blocks and its
    // bookkeeping (the bits of the other blocks are in its file, or none).
    size_t bytes() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Why a page is left out (the first rule that matched, in makedumpfile's order).
enum class PageClass : uint8_t { zero, cache, cache_private, user, free, hwpoison, offline };
inline constexpr size_t kPageClasses = 7;
const char* page_class_name(PageClass c);  // "zero", "cache", "cache_private", ...

// What the classifier reads. `present` (the dump's pages, ascending pfns,
// read a window at a time: the classifier holds a PfnBitmap, not the
// list; owned or not, see borrowed()) and `reader` are required; the rest
// refines.
struct DumpLevelInput {
    std::shared_ptr<const PageSource> present;
    PageReader reader;
    const Vmcoreinfo* vmcoreinfo = nullptr;  // null: level 1 at most
    FrameToPfn frame_to_pfn;                 // PV: machine frame -> pfn; empty: identity
    std::vector<uint64_t> stack_pointers;    // each vcpu's rsp (kernel addresses are used)
    std::vector<uint64_t> protected_pfns;    // kept whatever they hold (e.g. p2m frames)
    const std::atomic<bool>* cancel = nullptr;  // set -> Error("cancelled")
};

struct PageSelection {
    unsigned requested_level = 0;
    unsigned level = 0;              // applied: requested, less what the guest cannot support
    std::vector<std::string> limits; // why `level` is below `requested_level`, one sentence each
    // keep.test(pfn): present and not excluded by bits 2..16 (nor offline/hwpoison).
    // Bit 1 (zero pages) is decided on the page's bytes: keep_page().
    PfnBitmap keep;
    std::array<uint64_t, kPageClasses> excluded{};  // pages per class (zero: filled by count_zero_pages)
    uint64_t protected_pages = 0;    // pages the rules would have excluded, kept as needed for analysis
    uint64_t unreadable_struct_pages = 0;  // present pfns whose struct page could not be read (kept)
    uint64_t struct_page_bytes = 0;  // struct page bytes read

    bool keep_pfn(uint64_t pfn) const { return keep.test(pfn); }
    // The selector's question: keep `pfn`, whose bytes are `page`?
    bool keep_page(uint64_t pfn, std::span<const std::byte> page) const;
};

bool is_zero_page(std::span<const std::byte> page);

// A page source the caller keeps alive, as DumpLevelInput::present.
inline std::shared_ptr<const PageSource> borrowed(const PageSource& source) {
    return std::shared_ptr<const PageSource>(std::shared_ptr<const void>(), &source);
}

// Classifies every present pfn for `level` (0..31; Error beyond). Error when
// `cancel` is set; a guest whose VMCOREINFO lacks what a bit needs gets that
// bit dropped (listed in `limits`), never a guess.
PageSelection select_pages(const DumpLevelInput& input, unsigned level);

// The pages and bytes each class holds and what each level keeps, as
// `makedumpfile --mem-usage` reports them (reads every present page once
// for the zero check, and the struct pages once per level).
//
// What a level keeps is what a compact file written at that level holds
// (xen-dump-core(5)): `kept_pages` are the pages of its second bitmap, zero
// pages included (level bit 1 leaves no page out: a zero page is kept as a
// descriptor of the file's one shared zero page), and `zero_pages` are those
// of them that are all zero, which take no page data. The same two figures
// as DumpReader::nr_pages() and DumpReader::zero_pages() of the file.
// (makedumpfile --mem-usage counts a level with bit 1 as kept_pages -
// zero_pages.)
struct LevelEstimate {
    unsigned level;             // as asked
    unsigned applied;           // what a dump asked for `level` applies (DumpLevelInput's guest may lack a bit)
    uint64_t kept_pages;        // the second bitmap's pages, zero pages included
    uint64_t zero_pages;        // of them, all zero (stored as the shared zero page)
};
struct DumpLevelEstimate {
    uint64_t total_pages = 0;
    std::array<uint64_t, kPageClasses> excluded{};  // level 31's exclusions per class (zero: the zero pages it keeps)
    uint64_t protected_pages = 0;                    // at level 31
    uint64_t unreadable_struct_pages = 0;
    // 0, 1, 2, 4, 8, 16, 31 (those the guest supports), the highest level
    // the guest supports, and `also` (supported or not), ascending.
    std::vector<LevelEstimate> levels;
    unsigned max_level = 0;                          // the highest level the guest supports
    std::vector<std::string> limits;
};
// `also`: a level (0..31; Error beyond) whose row is wanted as well.
DumpLevelEstimate estimate_dump_levels(const DumpLevelInput& input, unsigned also = 0);

}  // namespace xendump::kernel
