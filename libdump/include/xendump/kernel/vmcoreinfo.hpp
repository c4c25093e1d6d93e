// The guest kernel's vmcoreinfo: finding it in guest memory (during the
// writer's single pass, or by a targeted pre-scan), validating it and reading
// the few values the dump needs. xen-dump-core(5) "Notes" note 7 stores its text unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xendump/kernel/guest_memory.hpp"

namespace xendump::kernel {

// A parsed, validated vmcoreinfo text (Linux kernel/crash_core.c writes it:
// one "KEY=value\n" line each; keys are OSRELEASE, BUILD-ID, PAGESIZE,
// CRASHTIME, KERNELOFFSET, SYMBOL(x), OFFSET(x.y), SIZE(x), LENGTH(x),
// NUMBER(x), ...).
class Vmcoreinfo {
public:
    // Validates and parses; nullopt when `text` is not a plausible vmcoreinfo
    // (see vmcoreinfo.cpp for the rules).
    static std::optional<Vmcoreinfo> parse(std::string_view text);

    const std::string& text() const { return text_; }  // without the NUL
    const std::map<std::string, std::string, std::less<>>& entries() const { return entries_; }
    std::optional<std::string_view> value(std::string_view key) const;

    std::string_view release() const;                   // OSRELEASE
    uint64_t page_size() const;                         // PAGESIZE
    std::optional<uint64_t> symbol(std::string_view name) const;  // SYMBOL(name), hex
    std::optional<int64_t> number(std::string_view name) const;   // NUMBER(name), decimal
    std::optional<uint64_t> kernel_offset() const;      // KERNELOFFSET, hex
    uint64_t phys_base() const;                         // NUMBER(phys_base), else 0
    std::optional<std::string_view> build_id() const;   // BUILD-ID

    // Pairs of (name, value) for every SYMBOL() line.
    std::vector<std::pair<std::string, uint64_t>> symbols() const;

    // How many lines it has: the completeness rank of a candidate.
    size_t size() const { return entries_.size(); }

private:
    std::string text_;
    std::map<std::string, std::string, std::less<>> entries_;
};

// Whether a kernel release the guest reports (OSRELEASE, the KERNEL= key, the
// banner's "Linux version RELEASE") may name its kernel where it becomes a
// file name, a command argument or a package name (xen-dumpctl debug's
// vmlinux path and -dbg hint): one path component of [A-Za-z0-9._+~-], 1 to
// 64 bytes (struct new_utsname's release field), neither "." nor "..".
// Anything else is recorded escaped and marked untrusted (KERNEL_UNTRUSTED=,
// xen-dump-core(5)) and is never used to build a path.
bool is_release_name(std::string_view release);

// Where a copy of the text lives. Linux keeps two page-aligned kernel copies:
// vmcoreinfo_data (the text at offset 0 of a zeroed page) and
// vmcoreinfo_note (the same text inside an ELF note "VMCOREINFO" whose header
// starts the page: text at offset 24).
enum class VmcoreinfoForm { data, note };

struct VmcoreinfoCandidate {
    uint64_t pfn = 0;
    VmcoreinfoForm form = VmcoreinfoForm::data;
    Vmcoreinfo info;
};

struct VmcoreinfoResult {
    Vmcoreinfo info;
    uint64_t pfn = 0;                 // where the chosen text was found
    bool confirmed_by_note = false;   // the same text is also in a vmcoreinfo_note page
    bool witnessed = false;           // init_uts_ns in memory holds the same release
    bool ambiguous = false;           // another complete, different text ranked equal, or
                                      // too many texts to rank and none witnessed
    size_t candidates = 0;            // how many valid candidate pages were seen
    size_t texts = 0;                 // how many different texts among them (kept or not)
    bool overflowed = false;          // more than VmcoreinfoScanner::kMaxTexts different texts
};

// One distinct text and where its copies were seen.
struct VmcoreinfoText {
    size_t hash = 0;                  // of the text
    Vmcoreinfo info;
    uint64_t pfn = 0;                 // the reported copy: the first data copy, else the first note copy
    VmcoreinfoForm form = VmcoreinfoForm::data;
    bool has_data = false, has_note = false;
    uint64_t min_pfn = ~0ULL;
};

// Fed every page once (any order; the writer gives pfn order). observe()
// rejects a page on its first 8 bytes: a load and two compares. A page that
// passes is copied once and everything else reads the copy: a live dump
// lends the running guest's mapping, which may change between two reads,
// and the text kept must be the one validated.
//
// Guest memory is hostile: it may hold any number of different texts that
// pass validation. The scanner therefore keeps at most kMaxTexts different
// texts (a text seen again is found by its hash and costs no parse and no
// memory), so work per page and memory are bounded whatever the guest
// holds. When a further text comes and every slot is taken, the least
// promising one by what can be told without reading memory (seen as both
// data and note, then more lines, then the lower pfn) gives way; result()
// then reports overflowed, and calls the choice ambiguous unless the winner
// is witnessed by init_uts_ns.
class VmcoreinfoScanner {
public:
    static constexpr size_t kMaxTexts = 64;

    void observe(uint64_t pfn, std::span<const std::byte> page);
    // A copy already parsed (choose_vmcoreinfo()).
    void add(const VmcoreinfoCandidate& candidate);

    // Ranks the texts kept (see choose_vmcoreinfo()); pass `memory`
    // (e.g. the finished dump) to also check them against init_uts_ns.
    // Reads memory for at most kMaxTexts texts.
    std::optional<VmcoreinfoResult> result(PhysicalMemory* memory = nullptr) const;

    const std::vector<VmcoreinfoText>& texts() const { return texts_; }
    uint64_t candidate_pages() const { return candidate_pages_; }  // valid copies seen
    uint64_t distinct_texts() const { return distinct_; }          // different texts seen
    uint64_t texts_parsed() const { return parsed_; }              // texts validated (the work done)
    bool overflowed() const { return distinct_ > texts_.size(); }
    uint64_t pages_seen() const { return pages_seen_; }

private:
    VmcoreinfoText* find(size_t hash, std::string_view text);
    void record(VmcoreinfoText& t, uint64_t pfn, VmcoreinfoForm form);
    void insert(VmcoreinfoText t);
    VmcoreinfoText& weakest();  // the least promising text kept (texts_ not empty)

    std::vector<VmcoreinfoText> texts_;
    uint64_t candidate_pages_ = 0, distinct_ = 0, parsed_ = 0;
    uint64_t pages_seen_ = 0;
};

// Parses one page as a vmcoreinfo copy (either form); nullopt if it is none.
// Reads `page` once (into a copy), as observe() does.
std::optional<VmcoreinfoCandidate> vmcoreinfo_from_page(uint64_t pfn,
                                                        std::span<const std::byte> page);

// Chooses among candidates. With `memory`, a candidate is also "witnessed"
// when init_uts_ns (its own SYMBOL, phys_base and OFFSET(uts_namespace.name))
// holds its OSRELEASE: the strongest evidence that it describes the running
// kernel rather than a file in page cache.
std::optional<VmcoreinfoResult> choose_vmcoreinfo(std::span<const VmcoreinfoCandidate> candidates,
                                                  PhysicalMemory* memory = nullptr);

// Targeted pre-scan for the dumper, which must write note 7 before the pages:
// reads `pfns` (in the given order) through `reader` and chooses among the
// copies found. Pass the pfns worth trying (e.g. the pages a kallsyms lookup
// of vmcoreinfo_data points at) or every present pfn for a full scan.
std::optional<VmcoreinfoResult> find_vmcoreinfo(const PageReader& reader,
                                                std::span<const uint64_t> pfns);

// A full pre-scan through a PageSource: reads every present page in the
// source's batches. Costs one extra read of all guest memory.
std::optional<VmcoreinfoResult> find_vmcoreinfo(PageSource& source);

}  // namespace xendump::kernel
