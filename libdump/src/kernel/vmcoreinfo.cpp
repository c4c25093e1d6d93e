// Finding and validating the guest kernel's vmcoreinfo (xen-dump-core(5) "Notes" note 7).
//
// Validation rules (a candidate must pass all of them):
//  - the text is printable ASCII lines, each ending in '\n', NUL-terminated
//    inside the page, and every byte after the NUL up to the end of the page
//    is zero (both kernel copies live in zeroed pages: crash_core.c
//    get_zeroed_page / alloc_pages_exact(__GFP_ZERO)); a fragment left in a
//    reused buffer fails here;
//  - every line is KEY=value with KEY either an upper-case word (OSRELEASE,
//    BUILD-ID, PAGESIZE, CRASHTIME, KERNELOFFSET, ...) or NAME(arg) with NAME
//    one of SYMBOL, OFFSET, SIZE, LENGTH, NUMBER; SYMBOL values are hex,
//    OFFSET/SIZE/LENGTH decimal, NUMBER decimal (maybe negative) or 0x-hex;
//  - the first line is OSRELEASE=, PAGESIZE is a power of two >= 4096, and
//    SYMBOL(swapper_pg_dir) is present (Linux writes these first, always).
//
// Choosing among valid candidates (look-alikes are e.g. a saved copy in a
// file's page cache, which is page-aligned and zero-padded too): distinct
// texts are ranked by, in order,
//  1. witnessed: init_uts_ns, located with the text's own SYMBOL/phys_base/
//     OFFSET, holds the text's OSRELEASE (only when memory can be read);
//  2. confirmed by note: the same text is present both as vmcoreinfo_data
//     and inside a vmcoreinfo_note page, as the running kernel keeps it
//     (crash_core.c update_vmcoreinfo_note); a file copy is one raw page;
//  3. completeness: more lines wins (a partial copy loses);
//  4. the lowest pfn.
// When the runner-up has the same 1-3 the result is marked ambiguous.
//
// Guest memory may hold any number of valid look-alikes (a hostile guest can
// fill itself with distinct texts). The scan stays linear with bounded
// memory: a text seen before is recognised by its hash (no parse, no copy),
// at most VmcoreinfoScanner::kMaxTexts different texts are kept, and only
// those are ranked (rule 1 reads a page or two for each). When more came,
// the choice stands only if witnessed (else it is ambiguous).
#include "xendump/kernel/vmcoreinfo.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <functional>
#include <tuple>

namespace xendump::kernel {
namespace {

constexpr std::string_view kFirstKey = "OSRELEASE=";
// Linux's ELF note header for vmcoreinfo_note: namesz 11, descsz, type 0,
// name "VMCOREINFO\0" padded to 12: the text starts at byte 24.
constexpr uint32_t kNoteNameSize = 11;
constexpr size_t kNoteTextOffset = 24;

bool is_upper_key(std::string_view k) {
    if (k.empty()) return false;
    return std::all_of(k.begin(), k.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
}

bool is_hex(std::string_view v) {
    return !v.empty() && v.size() <= 16 && std::all_of(v.begin(), v.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    });
}

bool is_decimal(std::string_view v, bool allow_minus) {
    if (allow_minus && !v.empty() && v.front() == '-') v.remove_prefix(1);
    return !v.empty() && v.size() <= 20 &&
           std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<uint64_t> parse_hex(std::string_view v) {
    if (!is_hex(v)) return std::nullopt;
    uint64_t x = 0;
    auto r = std::from_chars(v.data(), v.data() + v.size(), x, 16);
    if (r.ec != std::errc() || r.ptr != v.data() + v.size()) return std::nullopt;
    return x;
}

std::optional<int64_t> parse_number(std::string_view v) {
    if (v.starts_with("0x")) {
        auto x = parse_hex(v.substr(2));
        if (!x) return std::nullopt;
        return static_cast<int64_t>(*x);
    }
    if (!is_decimal(v, true)) return std::nullopt;
    int64_t x = 0;
    auto r = std::from_chars(v.data(), v.data() + v.size(), x, 10);
    if (r.ec != std::errc() || r.ptr != v.data() + v.size()) return std::nullopt;
    return x;
}

// KEY is NAME(arg): the value grammar depends on NAME.
bool valid_function_line(std::string_view key, std::string_view value) {
    const size_t open = key.find('(');
    if (open == std::string_view::npos || key.back() != ')') return false;
    const std::string_view name = key.substr(0, open);
    const std::string_view arg = key.substr(open + 1, key.size() - open - 2);
    if (arg.empty() || !std::all_of(arg.begin(), arg.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '.';
        }))
        return false;
    if (name == "SYMBOL") return is_hex(value);
    if (name == "OFFSET" || name == "SIZE" || name == "LENGTH") return is_decimal(value, true);
    if (name == "NUMBER") return parse_number(value).has_value();
    return false;
}

bool zero_tail(std::span<const std::byte> bytes) {
    return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

// The text of a copy starting at `text` within `page`, if NUL-terminated
// within `limit` bytes with a zero tail.
std::optional<std::string_view> text_in(std::span<const std::byte> page, size_t text, size_t limit) {
    if (text > page.size() || page.size() - text < limit) return std::nullopt;
    const auto* begin = reinterpret_cast<const char*>(page.data() + text);
    const void* nul = std::memchr(begin, 0, limit);
    if (nul == nullptr) return std::nullopt;
    const size_t len = static_cast<size_t>(static_cast<const char*>(nul) - begin);
    if (!zero_tail(page.subspan(text + len))) return std::nullopt;
    return std::string_view(begin, len);
}

}  // namespace

namespace {

// Checks the lines of a text one by one (the rules above), calling
// f(key, value) for each; false at the first line that breaks a rule.
template <class F>
bool for_each_line(std::string_view text, F&& f) {
    if (!text.starts_with(kFirstKey) || text.back() != '\n') return false;
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t eol = text.find('\n', pos);
        // A caller may pass a running guest's page (the scanner passes a
        // copy): its last byte, checked above, may have changed since.
        if (eol == std::string_view::npos) return false;
        const std::string_view line = text.substr(pos, eol - pos);
        pos = eol + 1;
        if (!std::all_of(line.begin(), line.end(), [](char c) { return c >= 0x20 && c < 0x7f; }))
            return false;
        const size_t eq = line.find('=');
        if (eq == std::string_view::npos || eq == 0) return false;
        const std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
        const bool ok = key.find('(') != std::string_view::npos ? valid_function_line(key, value)
                                                                : is_upper_key(key);
        if (!ok) return false;
        f(key, value);
    }
    return true;
}

// The lines every text must have (the first of each counts, as in the map).
struct RequiredLines {
    std::optional<std::string_view> page_size, release, swapper_pg_dir, kernel_offset;
    size_t lines = 0;

    void see(std::string_view key, std::string_view value) {
        ++lines;
        auto first = [&](std::optional<std::string_view>& slot, std::string_view name) {
            if (!slot && key == name) slot = value;
        };
        first(page_size, "PAGESIZE");
        first(release, "OSRELEASE");
        first(swapper_pg_dir, "SYMBOL(swapper_pg_dir)");
        first(kernel_offset, "KERNELOFFSET");
    }
    bool ok() const {
        uint64_t ps = 0;
        if (!page_size || !is_decimal(*page_size, false) ||
            std::from_chars(page_size->data(), page_size->data() + page_size->size(), ps).ec != std::errc() ||
            ps < 4096 || (ps & (ps - 1)) != 0)
            return false;
        if (!release || release->empty() || !swapper_pg_dir || !parse_hex(*swapper_pg_dir)) return false;
        return !kernel_offset || parse_hex(*kernel_offset);
    }
};

// Validates without building anything: the number of lines of a valid text
// (at least its number of distinct keys), nullopt for an invalid one.
std::optional<size_t> valid_lines(std::string_view text) {
    RequiredLines required;
    if (!for_each_line(text, [&](std::string_view k, std::string_view v) { required.see(k, v); }) ||
        !required.ok())
        return std::nullopt;
    return required.lines;
}

}  // namespace

std::optional<Vmcoreinfo> Vmcoreinfo::parse(std::string_view text) {
    Vmcoreinfo info;
    RequiredLines required;
    const bool lines_ok = for_each_line(text, [&](std::string_view key, std::string_view value) {
        required.see(key, value);
        info.entries_.emplace(std::string(key), std::string(value));  // first one wins
    });
    if (!lines_ok || !required.ok()) return std::nullopt;
    info.text_ = std::string(text);
    return info;
}

std::optional<std::string_view> Vmcoreinfo::value(std::string_view key) const {
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return std::string_view(it->second);
}

std::string_view Vmcoreinfo::release() const { return value("OSRELEASE").value_or(""); }

bool is_release_name(std::string_view release) {
    constexpr size_t kMaxRelease = 64;  // new_utsname.release is 65 bytes with its NUL
    if (release.empty() || release.size() > kMaxRelease || release == "." || release == "..") return false;
    return std::all_of(release.begin(), release.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '+' || c == '~' || c == '-';
    });
}

uint64_t Vmcoreinfo::page_size() const {
    uint64_t ps = 0;
    if (auto v = value("PAGESIZE")) std::from_chars(v->data(), v->data() + v->size(), ps);
    return ps;
}

std::optional<uint64_t> Vmcoreinfo::symbol(std::string_view name) const {
    auto v = value("SYMBOL(" + std::string(name) + ")");
    return v ? parse_hex(*v) : std::nullopt;
}

std::optional<int64_t> Vmcoreinfo::number(std::string_view name) const {
    auto v = value("NUMBER(" + std::string(name) + ")");
    return v ? parse_number(*v) : std::nullopt;
}

std::optional<uint64_t> Vmcoreinfo::kernel_offset() const {
    auto v = value("KERNELOFFSET");
    return v ? parse_hex(*v) : std::nullopt;
}

uint64_t Vmcoreinfo::phys_base() const {
    return static_cast<uint64_t>(number("phys_base").value_or(0));
}

std::optional<std::string_view> Vmcoreinfo::build_id() const { return value("BUILD-ID"); }

std::vector<std::pair<std::string, uint64_t>> Vmcoreinfo::symbols() const {
    std::vector<std::pair<std::string, uint64_t>> out;
    for (const auto& [key, v] : entries_) {
        if (!key.starts_with("SYMBOL(")) continue;
        if (auto x = parse_hex(v)) out.emplace_back(key.substr(7, key.size() - 8), *x);
    }
    return out;
}

namespace {

struct PageText {
    std::string_view text;
    VmcoreinfoForm form;
};

// The form a page's first 8 bytes may start, if any: the fast reject, a
// load and two compares per page.
std::optional<VmcoreinfoForm> form_of_head(std::span<const std::byte> page) {
    if (page.size() != kPageSize) return std::nullopt;
    uint64_t head = 0;
    std::memcpy(&head, page.data(), sizeof head);
    uint64_t data_head = 0;
    std::memcpy(&data_head, kFirstKey.data(), sizeof data_head);
    if (head == data_head) return VmcoreinfoForm::data;
    if (static_cast<uint32_t>(head) == kNoteNameSize) return VmcoreinfoForm::note;
    return std::nullopt;
}

// The text a page holds in either form (not yet validated), if any.
std::optional<PageText> text_of_page(std::span<const std::byte> page) {
    const auto form = form_of_head(page);
    if (!form) return std::nullopt;
    if (*form == VmcoreinfoForm::data) {
        auto text = text_in(page, 0, kPageSize);
        if (!text) return std::nullopt;
        return PageText{*text, VmcoreinfoForm::data};
    }
    uint32_t descsz = 0, type = 1;
    std::memcpy(&descsz, page.data() + 4, 4);
    std::memcpy(&type, page.data() + 8, 4);
    if (type != 0 || std::memcmp(page.data() + 12, "VMCOREINFO\0\0", 12) != 0) return std::nullopt;
    if (descsz == 0 || descsz > kPageSize - kNoteTextOffset) return std::nullopt;
    // The note's descriptor is the text without its NUL (crash_core.c
    // append_elf_note with data_size = vmcoreinfo_size), then padding.
    const std::string_view desc(reinterpret_cast<const char*>(page.data() + kNoteTextOffset), descsz);
    if (desc.find('\0') != std::string_view::npos) return std::nullopt;
    // Then padding, the final empty note and the zeroed rest of the page.
    if (!zero_tail(page.subspan(kNoteTextOffset + descsz))) return std::nullopt;
    return PageText{desc, VmcoreinfoForm::note};
}

size_t hash_of(std::string_view text) { return std::hash<std::string_view>{}(text); }

using PageCopy = std::array<std::byte, kPageSize>;

// The page copied once into `copy` when its first 8 bytes may start either
// form (the same fast reject as text_of_page, on the guest's page); false
// for any other page. A running guest's page (a live dump lends its
// mapping) may change between two reads: the checks, the hash, the parse
// and the text kept must all see the same bytes, so everything after this
// reads the copy, which text_of_page checks again from its first byte.
bool copy_candidate(std::span<const std::byte> page, PageCopy& copy) {
    if (!form_of_head(page)) return false;
    std::memcpy(copy.data(), page.data(), kPageSize);
    return true;
}

// What can be told of a text without reading memory; the least promising
// text gives way when the scanner is full.
auto promise(const VmcoreinfoText& t) {
    return std::make_tuple(t.has_data && t.has_note, t.info.size(), ~t.min_pfn);
}

}  // namespace

std::optional<VmcoreinfoCandidate> vmcoreinfo_from_page(uint64_t pfn,
                                                        std::span<const std::byte> page) {
    PageCopy copy;
    if (!copy_candidate(page, copy)) return std::nullopt;
    auto t = text_of_page(copy);
    if (!t) return std::nullopt;
    auto info = Vmcoreinfo::parse(t->text);
    if (!info) return std::nullopt;
    return VmcoreinfoCandidate{pfn, t->form, std::move(*info)};
}

VmcoreinfoText* VmcoreinfoScanner::find(size_t hash, std::string_view text) {
    for (auto& t : texts_)
        if (t.hash == hash && t.info.text() == text) return &t;
    return nullptr;
}

void VmcoreinfoScanner::record(VmcoreinfoText& t, uint64_t pfn, VmcoreinfoForm form) {
    ++candidate_pages_;
    (form == VmcoreinfoForm::data ? t.has_data : t.has_note) = true;
    // The data form is preferred as the reported copy.
    if (form == VmcoreinfoForm::data && t.form != VmcoreinfoForm::data) {
        t.form = form;
        t.pfn = pfn;
    }
    t.min_pfn = std::min(t.min_pfn, pfn);
}

VmcoreinfoText& VmcoreinfoScanner::weakest() {
    return *std::min_element(texts_.begin(), texts_.end(),
                             [](const auto& a, const auto& b) { return promise(a) < promise(b); });
}

void VmcoreinfoScanner::insert(VmcoreinfoText t) {
    ++distinct_;
    if (texts_.size() < kMaxTexts) {
        texts_.push_back(std::move(t));
        return;
    }
    VmcoreinfoText& w = weakest();
    if (promise(w) < promise(t)) w = std::move(t);
}

void VmcoreinfoScanner::observe(uint64_t pfn, std::span<const std::byte> page) {
    ++pages_seen_;
    PageCopy bytes;
    if (!copy_candidate(page, bytes)) return;
    auto copy = text_of_page(bytes);
    if (!copy) return;
    const size_t hash = hash_of(copy->text);
    if (VmcoreinfoText* known = find(hash, copy->text)) {
        record(*known, pfn, copy->form);  // seen before: no parse, no memory
        return;
    }
    ++parsed_;
    if (texts_.size() == kMaxTexts) {
        // Full (a flood of look-alikes): a text that could not take the
        // weakest one's place, even were each of its lines a different key,
        // is counted but neither parsed nor kept.
        auto lines = valid_lines(copy->text);
        if (!lines) return;
        VmcoreinfoText& w = weakest();
        if (!(promise(w) < std::make_tuple(false, *lines, ~pfn))) {
            ++candidate_pages_;
            ++distinct_;
            return;
        }
    }
    auto info = Vmcoreinfo::parse(copy->text);
    if (!info) return;
    VmcoreinfoText t{hash, std::move(*info), pfn, copy->form};
    record(t, pfn, copy->form);
    insert(std::move(t));
}

void VmcoreinfoScanner::add(const VmcoreinfoCandidate& c) {
    const size_t hash = hash_of(c.info.text());
    if (VmcoreinfoText* known = find(hash, c.info.text())) {
        record(*known, c.pfn, c.form);
        return;
    }
    VmcoreinfoText t{hash, c.info, c.pfn, c.form};
    record(t, c.pfn, c.form);
    insert(std::move(t));
}

namespace {

// init_uts_ns.name.release == OSRELEASE, reading memory where the text says
// (struct new_utsname: sysname[65], nodename[65], release[65]).
bool witnessed_by_uts(const Vmcoreinfo& info, PhysicalMemory& memory) {
    auto uts = info.symbol("init_uts_ns");
    auto name_off = info.value("OFFSET(uts_namespace.name)");
    if (!uts || !name_off || !is_kernel_image_address(*uts)) return false;
    auto off = parse_number(*name_off);
    if (!off || *off < 0 || *off > 4096) return false;
    constexpr uint64_t kReleaseInName = 2 * 65;
    const uint64_t phys =
        kernel_virt_to_phys(*uts, info.phys_base()) + static_cast<uint64_t>(*off) + kReleaseInName;
    auto release = memory.c_string(phys, 64);
    return release && *release == info.release();
}

struct Ranked {
    const VmcoreinfoText* text = nullptr;
    bool witnessed = false;
    auto key() const { return std::make_tuple(witnessed, text->has_data && text->has_note, text->info.size()); }
};

}  // namespace

std::optional<VmcoreinfoResult> VmcoreinfoScanner::result(PhysicalMemory* memory) const {
    if (texts_.empty()) return std::nullopt;
    std::vector<Ranked> ranked;
    ranked.reserve(texts_.size());
    for (const auto& t : texts_)
        ranked.push_back(Ranked{&t, memory != nullptr && witnessed_by_uts(t.info, *memory)});
    std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
        if (a.key() != b.key()) return a.key() > b.key();
        return a.text->min_pfn < b.text->min_pfn;
    });
    const Ranked& win = ranked.front();
    VmcoreinfoResult r{win.text->info, win.text->pfn, win.text->has_data && win.text->has_note, win.witnessed};
    // A text that gave way might have ranked higher: only a witnessed
    // winner stands then.
    r.ambiguous = (ranked.size() > 1 && ranked[1].key() == win.key()) || (overflowed() && !win.witnessed);
    r.candidates = candidate_pages_;
    r.texts = distinct_;
    r.overflowed = overflowed();
    return r;
}

std::optional<VmcoreinfoResult> choose_vmcoreinfo(std::span<const VmcoreinfoCandidate> candidates,
                                                  PhysicalMemory* memory) {
    VmcoreinfoScanner scanner;
    for (const auto& c : candidates) scanner.add(c);
    return scanner.result(memory);
}

std::optional<VmcoreinfoResult> find_vmcoreinfo(const PageReader& reader,
                                                std::span<const uint64_t> pfns) {
    VmcoreinfoScanner scanner;
    std::array<std::byte, kPageSize> page;
    for (uint64_t pfn : pfns)
        if (reader(pfn, PageSpan(page))) scanner.observe(pfn, page);
    PhysicalMemory memory(reader);
    return scanner.result(&memory);
}

std::optional<VmcoreinfoResult> find_vmcoreinfo(PageSource& source) {
    VmcoreinfoScanner scanner;
    const size_t batch = std::max<size_t>(1, source.preferred_batch());
    std::vector<std::byte> buf(batch * kPageSize);
    std::vector<uint8_t> unreadable(batch);
    for_each_entry_window(
        source,
        [&](uint64_t first, std::span<const PageEntry> entries) {
            const size_t n = entries.size();
            std::fill(unreadable.begin(), unreadable.end(), 0);
            source.read_pages(static_cast<size_t>(first), n, std::span(buf).first(n * kPageSize),
                              std::span(unreadable).first(n));
            for (size_t i = 0; i < n; ++i)
                if (!unreadable[i])
                    scanner.observe(entries[i].pfn, std::span<const std::byte>(buf).subspan(i * kPageSize, kPageSize));
        },
        batch);
    PhysicalMemory memory(page_reader(source));
    return scanner.result(&memory);
}

}  // namespace xendump::kernel
