// Dump levels (makedumpfile -d): see dump_level.hpp. The facts below come
// from makedumpfile 1.7.2 (makedumpfile.c: get_mm_sparsemem,
// validate_mem_section, __exclude_unnecessary_pages, page_is_buddy_v3,
// is_cache_page, isSlab, isOffline, isHugetlb; makedumpfile.h: isAnon,
// SECTION_MAP_MASK, PGMM_CACHED) and its later fixes for Linux 6.3+ (folio
// fields, PG_hugetlb, PAGE_HUGETLB_MAPCOUNT_VALUE, PAGE_SLAB_MAPCOUNT_VALUE,
// PAGE_UNACCEPTED_MAPCOUNT_VALUE), and from Linux include/linux/mmzone.h
// (mem_section) and page-flags.h.
#include "xendump/kernel/dump_level.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kernel/pfn_runs.hpp"
#include "xendump/error.hpp"
#include "xendump/kernel/kallsyms.hpp"
#include "xendump/kernel/printk_log.hpp"

namespace xendump::kernel {

const char* page_class_name(PageClass c) {
    switch (c) {
        case PageClass::zero: return "zero";
        case PageClass::cache: return "cache";
        case PageClass::cache_private: return "cache_private";
        case PageClass::user: return "user";
        case PageClass::free: return "free";
        case PageClass::hwpoison: return "hwpoison";
        case PageClass::offline: return "offline";
    }
    return "?";
}

bool is_zero_page(std::span<const std::byte> page) {
    if (page.size() < 8) return std::all_of(page.begin(), page.end(), [](std::byte b) { return b == std::byte{0}; });
    uint64_t head;
    std::memcpy(&head, page.data(), sizeof head);
    // The first 8 bytes are zero and every byte equals the one 8 further on
    // (memcmp is the fastest scan the C library has).
    return head == 0 && std::memcmp(page.data(), page.data() + 8, page.size() - 8) == 0;
}

bool PageSelection::keep_page(uint64_t pfn, std::span<const std::byte> page) const {
    if (!keep.test(pfn)) return false;
    return !((level & kExcludeZero) && is_zero_page(page));
}

namespace {

// The lowest x86_64 kernel address (the canonical kernel half): 4-level and
// 5-level paging (makedumpfile's is_kvaddr takes PAGE_OFFSET, above this).
uint64_t kernel_space_start(const KernelPaging& p) { return p.five_level ? 0xff00000000000000ULL : 0xffff800000000000ULL; }
constexpr uint64_t kPgmmCached = 512;     // makedumpfile reads struct pages 512 pfns at a time
constexpr uint64_t kSectionMapMask = ~uint64_t{31};  // SECTION_MAP_LAST_BIT = 1 << 5
constexpr uint64_t kSectionMarkedPresent = 1;
constexpr uint64_t kMaxCompoundOrder = 18;  // 1 GiB, the largest x86 page; beyond: invalid
constexpr uint64_t kThreadSize = 16384;     // x86_64 kernel stack (THREAD_SIZE without KASAN)
constexpr uint64_t kIsHugetlb = ~uint64_t{0};

void check_cancel(const std::atomic<bool>* cancel) {
    if (cancel && cancel->load(std::memory_order_relaxed)) throw Error("cancelled");
}

// "6.1.0-57-amd64" -> (6, 1); (0, 0) when unreadable.
std::pair<int, int> kernel_version(std::string_view release) {
    int major = 0, minor = 0;
    if (std::sscanf(std::string(release).c_str(), "%d.%d", &major, &minor) != 2) return {0, 0};
    return {major, minor};
}

// What VMCOREINFO says about struct page and mem_section, checked for sense.
struct Layout {
    uint64_t page_size = 0;  // SIZE(page)
    uint64_t flags = 0, mapping = 0;
    std::optional<uint64_t> mapcount, priv, compound_head, order, dtor;
    unsigned order_bytes = 1, dtor_bytes = 1;
    int64_t pg_lru = 0, pg_private = 0, pg_swapcache = 0, pg_slab = 0, pg_head_mask = 0;
    std::optional<int64_t> pg_swapbacked, pg_hwpoison, pg_buddy, pg_hugetlb;
    std::optional<int64_t> buddy_mapcount, offline_mapcount, hugetlb_mapcount, slab_mapcount, unaccepted_mapcount;
    std::optional<int64_t> hugetlb_dtor;
    std::optional<uint64_t> free_huge_page;
    std::optional<int64_t> free_area_len;
    // mem_section
    uint64_t mem_section = 0, section_struct = 0, section_map_offset = 0;
    std::optional<int64_t> section_roots;  // LENGTH(mem_section)
    unsigned section_size_bits = 0, max_physmem_bits = 0;

    bool cache_rules = false;  // bits 2, 4, 8
    bool buddy_rule = false;   // bit 16
};

// A non-negative decimal value of `key`; nullopt when absent or not one.
std::optional<int64_t> decimal(const Vmcoreinfo& v, std::string_view key) {
    auto s = v.value(key);
    if (!s || s->empty() || s->size() > 18) return std::nullopt;
    int64_t n = 0;
    for (char c : *s) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + (c - '0');
    }
    return n;
}

// A struct offset or size: a decimal of at most a page.
std::optional<uint64_t> offset(const Vmcoreinfo& v, std::string_view key) {
    auto n = decimal(v, key);
    if (!n || *n > static_cast<int64_t>(kPageSize)) return std::nullopt;
    return static_cast<uint64_t>(*n);
}

// A struct page field of `bytes` at `off` must lie within SIZE(page).
bool fits(const std::optional<uint64_t>& off, uint64_t bytes, uint64_t size) {
    return !off || *off + bytes <= size;
}

std::optional<Layout> read_layout(const Vmcoreinfo& v, std::vector<std::string>& limits) {
    Layout l;
    auto why = [&](const std::string& s) {
        limits.push_back(s);
        return std::nullopt;
    };
    auto size = offset(v, "SIZE(page)");
    auto flags = offset(v, "OFFSET(page.flags)");
    auto mapping = offset(v, "OFFSET(page.mapping)");
    auto ms = v.symbol("mem_section");
    auto ms_size = offset(v, "SIZE(mem_section)");
    auto ms_off = offset(v, "OFFSET(mem_section.section_mem_map)");
    auto ssb = v.number("SECTION_SIZE_BITS");
    // No kernel's sections are under 16 MiB (x86_64 27, powerpc 24): smaller
    // ones would cost dom0 a Section per few guest pfns.
    constexpr int64_t kMinSectionSizeBits = 20;
    auto mpb = v.number("MAX_PHYSMEM_BITS");
    if (!size || !flags || !mapping || !ms || !ms_size || !ms_off || !ssb || !mpb)
        return why("VMCOREINFO does not describe a SPARSEMEM struct page array (SIZE(page), OFFSET(page.flags), "
                   "OFFSET(page.mapping), SYMBOL(mem_section), SIZE(mem_section), NUMBER(SECTION_SIZE_BITS), "
                   "NUMBER(MAX_PHYSMEM_BITS)): only zero pages can be excluded");
    if (*size < 16 || *size > 512 || *flags + 8 > *size || *mapping + 8 > *size || *ms_size < 8 ||
        *ms_size > kPageSize || *ms_off + 8 > *ms_size || *ssb < kMinSectionSizeBits || *ssb > 40 || *mpb < *ssb || *mpb > 57)
        return why("VMCOREINFO's struct page / mem_section geometry is impossible: only zero pages can be excluded");
    l.page_size = *size;
    l.flags = *flags;
    l.mapping = *mapping;
    l.mem_section = *ms;
    l.section_struct = *ms_size;
    l.section_map_offset = *ms_off;
    l.section_size_bits = static_cast<unsigned>(*ssb);
    l.max_physmem_bits = static_cast<unsigned>(*mpb);
    l.section_roots = decimal(v, "LENGTH(mem_section)");
    l.mapcount = offset(v, "OFFSET(page._mapcount)");
    l.priv = offset(v, "OFFSET(page.private)");
    l.compound_head = offset(v, "OFFSET(page.compound_head)");
    // The compound order and destructor live in the first tail page.
    if (auto o = offset(v, "OFFSET(folio._folio_order)"); o && *o >= l.page_size) l.order = *o - l.page_size;
    else l.order = offset(v, "OFFSET(page.compound_order)");
    if (auto o = offset(v, "OFFSET(folio._folio_dtor)"); o && *o >= l.page_size) l.dtor = *o - l.page_size;
    else l.dtor = offset(v, "OFFSET(page.compound_dtor)");
    const auto [major, minor] = kernel_version(v.release());
    if (major < 4 || (major == 4 && minor < 4)) {
        l.order.reset();  // before 4.4 the fields were in page.lru: not read here
        l.dtor.reset();
    } else if (major == 4 && minor < 16) {
        l.order_bytes = l.dtor_bytes = 2;
    }
    if (!fits(l.mapcount, 4, l.page_size) || !fits(l.priv, 8, l.page_size) || !fits(l.compound_head, 8, l.page_size) ||
        !fits(l.order, l.order_bytes, l.page_size) || !fits(l.dtor, l.dtor_bytes, l.page_size))
        return why("VMCOREINFO places a struct page field beyond SIZE(page): only zero pages can be excluded");

    auto lru = v.number("PG_lru"), priv = v.number("PG_private"), swapcache = v.number("PG_swapcache"),
         slab = v.number("PG_slab"), head = v.number("PG_head_mask");
    auto bit_ok = [](const std::optional<int64_t>& b) { return !b || (*b >= 0 && *b < 64); };
    l.pg_swapbacked = v.number("PG_swapbacked");
    l.pg_hwpoison = v.number("PG_hwpoison");
    l.pg_buddy = v.number("PG_buddy");
    l.pg_hugetlb = v.number("PG_hugetlb");
    if (!bit_ok(lru) || !bit_ok(priv) || !bit_ok(swapcache) || !bit_ok(slab) || !bit_ok(l.pg_swapbacked) ||
        !bit_ok(l.pg_hwpoison) || !bit_ok(l.pg_buddy) || !bit_ok(l.pg_hugetlb))
        return why("VMCOREINFO gives a PG_* bit number beyond 63: only zero pages can be excluded");
    l.buddy_mapcount = v.number("PAGE_BUDDY_MAPCOUNT_VALUE");
    l.offline_mapcount = v.number("PAGE_OFFLINE_MAPCOUNT_VALUE");
    l.hugetlb_mapcount = v.number("PAGE_HUGETLB_MAPCOUNT_VALUE");
    l.slab_mapcount = v.number("PAGE_SLAB_MAPCOUNT_VALUE");
    l.unaccepted_mapcount = v.number("PAGE_UNACCEPTED_MAPCOUNT_VALUE");
    l.hugetlb_dtor = v.number("HUGETLB_PAGE_DTOR");
    l.free_huge_page = v.symbol("free_huge_page");
    if (auto n = offset(v, "LENGTH(zone.free_area)"); n && *n >= 1 && *n <= 20) l.free_area_len = static_cast<int64_t>(*n);
    if (lru && priv && swapcache && slab && head) {
        l.pg_lru = *lru;
        l.pg_private = *priv;
        l.pg_swapcache = *swapcache;
        l.pg_slab = *slab;
        l.pg_head_mask = *head;
        l.cache_rules = true;
    } else {
        limits.push_back("VMCOREINFO lacks NUMBER(PG_lru|PG_private|PG_swapcache|PG_slab|PG_head_mask): "
                         "cache and user pages (bits 2, 4, 8) cannot be told");
    }
    // makedumpfile's page_is_buddy_v3 (>= 2.6.38) or _v2 (PG_buddy); without
    // either it follows the zones' free lists, which is not done here.
    if (l.cache_rules && l.priv && ((l.buddy_mapcount && l.mapcount) || l.pg_buddy) && l.free_area_len)
        l.buddy_rule = true;
    else
        limits.push_back("VMCOREINFO lacks what marks a free page (OFFSET(page.private), "
                         "NUMBER(PAGE_BUDDY_MAPCOUNT_VALUE) with OFFSET(page._mapcount), LENGTH(zone.free_area)): "
                         "free pages (bit 16) cannot be told");
    return l;
}

template <class T>
T field(const std::byte* sp, uint64_t off) {
    T v;
    std::memcpy(&v, sp + off, sizeof v);
    return v;
}

bool bit(uint64_t flags, int64_t nr) { return (flags >> nr) & 1; }

// The struct page array, section by section.
struct Section {
    uint64_t first_pfn, end_pfn;
    uint64_t mem_map;  // virtual address of first_pfn's struct page
};

// The sections' mem_maps, read as makedumpfile's get_mem_section does: first
// taking SYMBOL(mem_section) as the root array itself, then (SPARSEMEM_EXTREME
// only) as a pointer to it. nullopt when neither reading yields a consistent map.
std::optional<std::vector<Section>> find_sections(const Layout& l, uint64_t max_pfn, KernelVirtualMemory& kvm,
                                                  const std::atomic<bool>* cancel) {
    const uint64_t kKernelSpaceStart = kernel_space_start(kvm.paging());
    const uint64_t pfn_shift = l.section_size_bits - 12;
    const uint64_t pages_per_section = uint64_t{1} << pfn_shift;
    const uint64_t nr_mem_sections = uint64_t{1} << (l.max_physmem_bits - l.section_size_bits);
    const uint64_t num_section = std::min(nr_mem_sections, (max_pfn + pages_per_section - 1) / pages_per_section);
    const uint64_t per_root_extreme = kPageSize / l.section_struct;
    const bool extreme = !l.section_roots ||
                         static_cast<uint64_t>(*l.section_roots) ==
                             (nr_mem_sections + per_root_extreme - 1) / per_root_extreme;
    const uint64_t per_root = extreme ? per_root_extreme : 1;
    const uint64_t roots = (num_section + per_root - 1) / per_root;

    auto read_u64 = [&](uint64_t vaddr) -> std::optional<uint64_t> {
        uint64_t v;
        if (!kvm.read(vaddr, std::as_writable_bytes(std::span(&v, 1)))) return std::nullopt;
        return v;
    };
    auto attempt = [&](uint64_t array) -> std::optional<std::vector<Section>> {
        std::vector<uint64_t> root(extreme ? roots : 0);
        for (uint64_t i = 0; i < root.size(); ++i) {
            auto r = read_u64(array + i * 8);
            if (!r) return std::nullopt;  // makedumpfile: cannot read the array
            root[i] = *r;
        }
        std::vector<Section> out;
        for (uint64_t nr = 0; nr < num_section; ++nr) {
            if ((nr & 1023) == 0) check_cancel(cancel);
            uint64_t addr;
            if (extreme) {
                if (root[nr / per_root] == 0) continue;
                addr = root[nr / per_root] + (nr % per_root) * l.section_struct;
            } else {
                addr = array + nr * l.section_struct;
            }
            if (addr < kKernelSpaceStart) continue;
            auto coded = read_u64(addr + l.section_map_offset);
            if (!coded || !(*coded & kSectionMarkedPresent)) continue;
            const uint64_t mem_map = (*coded & kSectionMapMask) + (nr << pfn_shift) * l.page_size;
            if (mem_map < kKernelSpaceStart) return std::nullopt;  // makedumpfile: not a kernel address
            out.push_back({nr << pfn_shift, std::min(max_pfn, (nr + 1) << pfn_shift), mem_map});
        }
        if (out.empty()) return std::nullopt;
        return out;
    };
    if (auto s = attempt(l.mem_section)) return s;
    if (!extreme) return std::nullopt;
    auto pointer = read_u64(l.mem_section);
    if (!pointer || *pointer < kKernelSpaceStart) return std::nullopt;
    return attempt(*pointer);
}

// Marks the pfns of [vaddr, vaddr + size) that the page tables map.
void protect_virtual(KernelVirtualMemory& kvm, uint64_t vaddr, uint64_t size, PfnBitmap& protect) {
    const uint64_t first = vaddr & ~(kPageSize - 1);
    for (uint64_t v = first; v - first < size + (vaddr - first); v += kPageSize) {
        if (v < first) break;  // wrapped
        if (auto p = kvm.translate(v)) protect.set(*p / kPageSize);
    }
}

// Every page-table page reachable from the top table. Each table page is
// visited once (`visited`).
class TableWalk {
public:
    TableWalk(PhysicalMemory& memory, const KernelPaging& paging, const FrameToPfn& frame_to_pfn, PfnBitmap& protect,
              const std::atomic<bool>* cancel)
        : memory_(memory), paging_(paging), frame_to_pfn_(frame_to_pfn), protect_(protect),
          visited_(protect.size()), cancel_(cancel) {}

    void run() {
        if (!paging_.top_table) return;
        walk(*paging_.top_table / kPageSize, paging_.five_level ? 0 : 1, 0);
    }

private:
    static constexpr unsigned kShift[] = {48, 39, 30, 21, 12};

    std::optional<uint64_t> pfn_of(uint64_t frame) const {
        if (!frame_to_pfn_) return frame;
        return frame_to_pfn_(frame);
    }

    // Sign-extends a 48- or 57-bit address.
    uint64_t canonical(uint64_t v) const {
        const unsigned bits = paging_.five_level ? 57 : 48;
        return (v & (uint64_t{1} << (bits - 1))) ? v | ~((uint64_t{1} << bits) - 1) : v;
    }

    void walk(uint64_t table_pfn, unsigned level, uint64_t base) {
        if (table_pfn >= visited_.size() || visited_.test(table_pfn)) return;
        visited_.set(table_pfn);
        protect_.set(table_pfn);
        if ((++tables_ & 255) == 0) check_cancel(cancel_);
        const std::byte* page = memory_.page(table_pfn);
        if (page == nullptr) return;
        std::array<uint64_t, 512> entries;
        std::memcpy(entries.data(), page, kPageSize);  // the cache slot may be reused below
        const uint64_t mask = 0x000ffffffffff000ULL & ~paging_.sme_mask;
        for (unsigned i = 0; i < 512; ++i) {
            const uint64_t e = entries[i];
            if (!(e & 1)) continue;
            const uint64_t va = canonical(base | (uint64_t{i} << kShift[level]));
            const bool leaf = level == 4 || ((level == 2 || level == 3) && (e & (1u << 7)));
            if (!leaf) {
                if (auto next = pfn_of((e & mask) / kPageSize)) walk(*next, level + 1, va);
                continue;
            }
            // A leaf maps data, not tables: the image is protected by its sections.
        }
    }

    PhysicalMemory& memory_;
    const KernelPaging& paging_;
    const FrameToPfn& frame_to_pfn_;
    PfnBitmap& protect_;
    PfnBitmap visited_;
    const std::atomic<bool>* cancel_;
    uint64_t tables_ = 0;
};

// Everything one classification needs, built once per input.
class Classifier {
public:
    explicit Classifier(const DumpLevelInput& in)
        : in_(in), memory_(in.reader),
          kvm_(memory_, in.vmcoreinfo ? KernelPaging::from_vmcoreinfo(*in.vmcoreinfo) : KernelPaging{},
               in.frame_to_pfn) {
        if (!in.present) throw Error("internal error: the dump level classifier has no list of pages");
        max_pfn_ = end_pfn(*in.present);
        present_ = PfnBitmap(max_pfn_);
        for_each_entry_window(*in.present, [&](uint64_t, std::span<const PageEntry> w) {
            set_pfns(present_, w);
        });
        if (!in.vmcoreinfo) {
            limits_.push_back("no VMCOREINFO of a Linux kernel: only zero pages can be excluded (level 1 at most)");
            return;
        }
        layout_ = read_layout(*in.vmcoreinfo, limits_);
        if (layout_) {
            sections_ = find_sections(*layout_, max_pfn_, kvm_, in.cancel);
            if (!sections_) {
                limits_.push_back("the guest's mem_section array could not be read (not in the dump, or not "
                                  "SPARSEMEM): only zero pages can be excluded");
                layout_.reset();
            }
        }
        protect_ = PfnBitmap(max_pfn_);
        build_protected();
    }

    unsigned supported(unsigned level) const {
        unsigned ok = kExcludeZero;
        if (layout_ && layout_->cache_rules) ok |= kExcludeCache | kExcludeCachePrivate | kExcludeUserData;
        if (layout_ && layout_->buddy_rule) ok |= kExcludeFree;
        return level & ok;
    }
    const std::vector<std::string>& limits() const { return limits_; }
    const PfnBitmap& present() const { return present_; }

    PageSelection run(unsigned requested) {
        if (requested > kMaxDumpLevel)
            throw Error("dump level " + std::to_string(requested) + " is out of range (0..31)");
        PageSelection s;
        s.requested_level = requested;
        s.level = supported(requested);
        if (s.level != requested) s.limits = limits_;
        s.keep = present_;
        if (layout_ && (s.level & ~kExcludeZero || layout_->pg_hwpoison || layout_->offline_mapcount)) {
            PfnBitmap struct_pages(max_pfn_);
            for (const Section& sec : *sections_) pass(sec, s, struct_pages);
            // Pages needed for analysis come back, whatever the rules said.
            const uint64_t before = s.keep.count();
            s.keep.merge_masked(protect_, present_);
            s.keep.merge_masked(struct_pages, present_);
            s.protected_pages = s.keep.count() - before;
        }
        return s;
    }

private:
    void build_protected() {
        for (uint64_t pfn : in_.protected_pfns) protect_.set(pfn);
        check_cancel(in_.cancel);
        TableWalk(memory_, kvm_.paging(), in_.frame_to_pfn, protect_, in_.cancel).run();
        protect_image();
        for (uint64_t sp : in_.stack_pointers)
            if (sp >= kernel_space_start(kvm_.paging())) protect_virtual(kvm_, sp & ~(kThreadSize - 1), kThreadSize, protect_);
        // The printk buffer: every page the log reader touches.
        if (printk_format(*in_.vmcoreinfo)) {
            try {
                read_printk_log(*in_.vmcoreinfo, [this](uint64_t vaddr, std::span<std::byte> out) {
                    if (!kvm_.read(vaddr, out)) return false;
                    protect_virtual(kvm_, vaddr, out.size(), protect_);
                    return true;
                });
            } catch (const Error&) {
                // No log to protect (its header is not in the dump): nothing to keep for it.
            }
        }
    }

    // The kernel image's sections that stay in use after boot, found by the
    // kernel's own symbols (kallsyms): text [_text, _etext), read-only data
    // [__start_rodata, __end_rodata), data [_sdata, _edata), bss [__bss_start,
    // __bss_stop) less its unused decrypted tail (__start_bss_decrypted_unused).
    // What lies between them (the text/rodata and rodata/data gaps, the init
    // sections, the unused brk, the 2 MiB tails) the kernel frees at boot
    // (free_kernel_image_pages, free_initmem, mem_encrypt_free_decrypted_mem)
    // and reuses like any page. Also every kernel-image SYMBOL() of VMCOREINFO.
    void protect_image() {
        const Vmcoreinfo& v = *in_.vmcoreinfo;
        const uint64_t phys_base = v.phys_base();
        auto protect_range = [&](uint64_t from, uint64_t to) {
            if (!is_kernel_image_address(from) || to < from || to - from > (uint64_t{2} << 30)) return;
            const uint64_t first = kernel_virt_to_phys(from, phys_base) / kPageSize;
            const uint64_t last = (kernel_virt_to_phys(to, phys_base) + kPageSize - 1) / kPageSize;
            protect_.set_range(first, last);
        };
        for (const auto& [name, address] : v.symbols()) protect_range(address, address + 1);
        std::optional<Kallsyms> k;
        try {
            KallsymsOptions options;
            options.cancel = in_.cancel;
            k = find_kallsyms(in_.reader, &v, options);
        } catch (const Error&) {
            if (in_.cancel && in_.cancel->load()) throw;
        }
        if (!k) {
            limits_.push_back("no kallsyms in guest memory: the kernel image's sections are not told apart, only "
                              "its VMCOREINFO symbols are kept whatever their struct page says");
            return;
        }
        const SymbolTable& t = k->table;
        auto range = [&](const char* from, const char* to) {
            auto a = t.address(from), b = t.address(to);
            if (a && b) protect_range(*a, *b);
        };
        range("_text", "_etext");
        range("__start_rodata", "__end_rodata");
        range("_sdata", "_edata");
        if (t.address("__start_bss_decrypted_unused")) range("__bss_start", "__start_bss_decrypted_unused");
        else range("__bss_start", "__bss_stop");
    }

    // One section, as __exclude_unnecessary_pages walks it.
    void pass(const Section& sec, PageSelection& s, PfnBitmap& struct_pages) {
        const Layout& l = *layout_;
        const unsigned lv = s.level;
        std::vector<std::byte> cache(kPgmmCached * l.page_size);
        std::vector<uint8_t> readable(kPgmmCached);
        uint64_t window = ~uint64_t{0};
        for (uint64_t pfn = sec.first_pfn; pfn < sec.end_pfn;) {
            if (!present_.test(pfn)) {
                pfn = present_.next_set(pfn);
                continue;
            }
            const uint64_t index = pfn % kPgmmCached;
            if (pfn - index != window) {
                check_cancel(in_.cancel);
                window = pfn - index;
                load_window(sec, window, cache, readable, s, struct_pages);
            }
            if (!readable[index]) {
                ++s.unreadable_struct_pages;
                ++pfn;
                continue;
            }
            const std::byte* sp = cache.data() + index * l.page_size;
            const uint64_t flags = field<uint64_t>(sp, l.flags);
            const uint64_t mapping = field<uint64_t>(sp, l.mapping);
            const int32_t mapcount = l.mapcount ? field<int32_t>(sp, *l.mapcount) : 0;
            const uint64_t priv = l.priv ? field<uint64_t>(sp, *l.priv) : 0;
            uint64_t order = 0, dtor = 0;
            if (index < kPgmmCached - 1 && readable[index + 1] && (flags & static_cast<uint64_t>(l.pg_head_mask))) {
                const std::byte* next = sp + l.page_size;
                if (l.hugetlb_mapcount) {  // Linux 6.9+
                    order = field<uint64_t>(next, l.flags) & 0xff;
                    if (l.mapcount && mapcount == static_cast<int32_t>(*l.hugetlb_mapcount)) dtor = kIsHugetlb;
                } else if (l.pg_hugetlb) {  // Linux 6.6+
                    const uint64_t f1 = field<uint64_t>(next, l.flags);
                    order = f1 & 0xff;
                    if (bit(f1, *l.pg_hugetlb)) dtor = kIsHugetlb;
                } else {
                    if (l.order)
                        order = l.order_bytes == 1 ? field<uint8_t>(next, *l.order) : field<uint16_t>(next, *l.order);
                    if (l.dtor)
                        dtor = l.dtor_bytes == 1 ? field<uint8_t>(next, *l.dtor) : field<uint16_t>(next, *l.dtor);
                }
                if (order > kMaxCompoundOrder || (pfn & ((uint64_t{1} << order) - 1)) != 0) order = 0;
            }
            const uint64_t head = l.compound_head ? field<uint64_t>(sp, *l.compound_head) : 0;
            const bool slab = (l.slab_mapcount && l.mapcount && mapcount == static_cast<int32_t>(*l.slab_mapcount)) ||
                              bit(flags, l.pg_slab);
            const bool anon = (mapping & 1) != 0 && !slab;  // PAGE_MAPPING_ANON
            const bool priv_flag = bit(flags, l.pg_private);
            const bool cache_page = bit(flags, l.pg_lru) ||
                                    ((!l.pg_swapbacked || bit(flags, *l.pg_swapbacked)) && bit(flags, l.pg_swapcache));
            const bool hugetlb = dtor == kIsHugetlb || (l.hugetlb_dtor && static_cast<uint64_t>(*l.hugetlb_dtor) == dtor) ||
                                 (l.free_huge_page && *l.free_huge_page == dtor);
            bool buddy = false;
            if (l.buddy_rule) {
                if (l.buddy_mapcount && l.mapcount)
                    buddy = !slab && mapcount == static_cast<int32_t>(*l.buddy_mapcount);
                else if (l.pg_buddy)
                    buddy = bit(flags, *l.pg_buddy);
            }
            uint64_t nr = uint64_t{1} << order;
            std::optional<PageClass> cls;
            if (head & 1) {
                // A compound tail: its head's range decided it.
            } else if ((lv & kExcludeFree) && buddy) {
                if (priv < static_cast<uint64_t>(*l.free_area_len)) {  // else an invalid order: kept
                    nr = uint64_t{1} << priv;
                    cls = PageClass::free;
                }
            } else if ((lv & kExcludeFree) && l.unaccepted_mapcount && l.mapcount &&
                       mapcount == static_cast<int32_t>(*l.unaccepted_mapcount) && l.free_area_len) {
                nr = uint64_t{1} << (*l.free_area_len - 1);
                cls = PageClass::free;
            } else if ((lv & kExcludeCache) && cache_page && !priv_flag && !anon) {
                cls = PageClass::cache;
            } else if ((lv & kExcludeCachePrivate) && cache_page && !anon) {
                cls = priv_flag ? PageClass::cache_private : PageClass::cache;
            } else if ((lv & kExcludeUserData) && (anon || hugetlb)) {
                cls = PageClass::user;
            } else if (l.pg_hwpoison && bit(flags, *l.pg_hwpoison)) {
                cls = PageClass::hwpoison;
            } else if (l.offline_mapcount && l.mapcount && !slab &&
                       mapcount == static_cast<int32_t>(*l.offline_mapcount)) {
                cls = PageClass::offline;
            }
            if (!cls) {
                ++pfn;
                continue;
            }
            const uint64_t end = std::min(max_pfn_, pfn + nr < pfn ? max_pfn_ : pfn + nr);
            for (uint64_t p = pfn; p < end; ++p)
                if (s.keep.test(p)) {
                    s.keep.reset(p);
                    ++s.excluded[static_cast<size_t>(*cls)];
                }
            pfn = std::max(end, pfn + 1);
        }
    }

    // Reads the struct pages of pfns [window, window + 512) within the section.
    void load_window(const Section& sec, uint64_t window, std::vector<std::byte>& cache, std::vector<uint8_t>& readable,
                     PageSelection& s, PfnBitmap& struct_pages) {
        const Layout& l = *layout_;
        const uint64_t first = std::max(window, sec.first_pfn);
        const uint64_t end = std::min(window + kPgmmCached, sec.end_pfn);
        std::fill(readable.begin(), readable.end(), 0);
        const uint64_t vaddr = sec.mem_map + (first - sec.first_pfn) * l.page_size;
        const uint64_t bytes = (end - first) * l.page_size;
        std::span<std::byte> out(cache.data() + (first - window) * l.page_size, bytes);
        s.struct_page_bytes += bytes;
        if (kvm_.read(vaddr, out)) {
            std::fill(readable.begin() + static_cast<long>(first - window), readable.begin() + static_cast<long>(end - window), 1);
        } else {
            for (uint64_t p = first; p < end; ++p)
                readable[p - window] = kvm_.read(vaddr + (p - first) * l.page_size,
                                                 out.subspan((p - first) * l.page_size, l.page_size));
        }
        protect_virtual(kvm_, vaddr, bytes, struct_pages);
    }

    const DumpLevelInput& in_;
    PhysicalMemory memory_;
    KernelVirtualMemory kvm_;
    uint64_t max_pfn_ = 0;
    PfnBitmap present_, protect_;
    std::optional<Layout> layout_;
    std::optional<std::vector<Section>> sections_;
    std::vector<std::string> limits_;
};

}  // namespace

PageSelection select_pages(const DumpLevelInput& input, unsigned level) {
    Classifier c(input);
    return c.run(level);
}

DumpLevelEstimate estimate_dump_levels(const DumpLevelInput& input, unsigned also) {
    if (also > kMaxDumpLevel) throw Error("dump level " + std::to_string(also) + " is out of range (0..31)");
    Classifier c(input);
    DumpLevelEstimate e;
    e.total_pages = input.present->nr_entries();
    e.limits = c.limits();
    e.max_level = c.supported(kMaxDumpLevel);
    // Zero pages once (every present page read once).
    PfnBitmap zero(c.present().size());
    std::array<std::byte, kPageSize> buf;
    uint64_t n = 0;
    for_each_entry_window(*input.present, [&](uint64_t, std::span<const PageEntry> w) {
        for (const auto& entry : w) {
            if ((++n & 4095) == 0) check_cancel(input.cancel);
            // A page that cannot be read is written as zeros: the shared zero page.
            if (!input.reader(entry.pfn, PageSpan(buf)) || is_zero_page(buf)) zero.set(entry.pfn);
        }
    });
    // The kept pages that are zero: a compact file keeps them as the shared zero page.
    auto kept_zero = [&](const PageSelection& s) {
        PfnBitmap z(zero.size());
        z.merge_masked(zero, s.keep);
        return z.count();
    };
    std::vector<unsigned> levels = {0, 1, 2, 4, 8, 16, 31};
    std::erase_if(levels, [&](unsigned l) { return c.supported(l) != l; });
    for (unsigned l : {e.max_level, also})
        if (std::find(levels.begin(), levels.end(), l) == levels.end()) levels.push_back(l);
    std::sort(levels.begin(), levels.end());
    for (unsigned level : levels) {
        if (level == 0) {  // a level-0 file keeps every present page (no selection)
            e.levels.push_back({0, 0, e.total_pages, zero.count()});
            continue;
        }
        PageSelection s = c.run(level);
        const uint64_t zeros = kept_zero(s);
        e.levels.push_back({level, s.level, s.keep.count(), zeros});
        if (level != e.max_level) continue;
        // The classes as the highest level the guest supports excludes them.
        e.excluded = s.excluded;
        e.protected_pages = s.protected_pages;
        e.unreadable_struct_pages = s.unreadable_struct_pages;
        e.excluded[static_cast<size_t>(PageClass::zero)] = zeros;
    }
    return e;
}

}  // namespace xendump::kernel
