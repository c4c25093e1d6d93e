// The guest kernel's symbol table, decoded from its kallsyms tables in guest
// physical memory (no vmlinux or System.map needed). Layout facts: Linux 6.1
// scripts/kallsyms.c and kernel/kallsyms.c (CONFIG_KALLSYMS_BASE_RELATIVE):
// kallsyms_offsets (s32[N]), kallsyms_relative_base (u64), kallsyms_num_syms
// (u32), kallsyms_names (length-prefixed token codes; a length byte with bit
// 7 set is followed by a second byte: "big" symbols), kallsyms_markers
// (u32 or u64 every 256 names), optionally kallsyms_seqs_of_names (u8[N][3],
// v6.2 and some 6.1 stable kernels such as Debian's 6.1.0-57),
// kallsyms_token_table (256 NUL-terminated tokens), kallsyms_token_index
// (u16[256]), each 8-aligned, in that order.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"

namespace xendump::kernel {

// The most symbols a kallsyms table is believed to hold (kallsyms_num_syms):
// a real kernel has far fewer (Debian's 6.1 about 120,000; kallsyms holds no
// module symbols), and each one decoded costs dom0 about 100 bytes.
inline constexpr uint32_t kMaxKallsymsSymbols = 1'000'000;

struct KernelSymbol {
    std::string name;
    uint64_t address = 0;
    char type = '?';  // nm-style: T/t text, D/d data, B/b bss, R/r rodata, ...
};

class SymbolTable {
public:
    SymbolTable() = default;
    explicit SymbolTable(std::vector<KernelSymbol> symbols);

    // By name. Per-cpu variables are accepted with or without the
    // "per_cpu__" prefix that kernels before 2.6.34 gave them (crash does the
    // same). With duplicate names a global (upper-case type) symbol wins.
    const KernelSymbol* find(std::string_view name) const;
    std::optional<uint64_t> address(std::string_view name) const;

    struct Resolved {
        const KernelSymbol* symbol;
        uint64_t offset;
    };
    // The symbol at or below `address` (the nearest lower one), if any; of
    // several at one address, the first in kallsyms order (the kernel's choice).
    std::optional<Resolved> resolve(uint64_t address) const;
    std::string describe(uint64_t address) const;  // "name+0x1f" or hex

    const std::vector<KernelSymbol>& symbols() const { return symbols_; }
    size_t size() const { return symbols_.size(); }

private:
    // Indices into symbols_ (no second copy of the names): 4 bytes a
    // symbol each, as a guest may hand over up to kallsyms' limit.
    std::vector<KernelSymbol> symbols_;  // kallsyms order
    std::vector<uint32_t> by_name_;      // sorted by name; of equal names, globals first, then kallsyms order
    std::vector<uint32_t> by_address_;   // sorted stably by address (kallsyms order among equals)
};

// Guest-physical addresses where the tables were found.
struct KallsymsLocation {
    uint64_t offsets = 0, relative_base = 0, num_syms = 0, names = 0, markers = 0,
             token_table = 0, token_index = 0;
    unsigned marker_size = 0;       // 4 or 8
    uint64_t seqs_of_names = 0;     // 0 when the kernel has no such table
    bool absolute_percpu = false;   // CONFIG_KALLSYMS_ABSOLUTE_PERCPU encoding seen
};

struct Kallsyms {
    SymbolTable table;
    KallsymsLocation where;
    uint64_t phys_base = 0;       // used to translate kernel-image addresses
    bool phys_base_from_vmcoreinfo = false;
    size_t verified_symbols = 0;  // vmcoreinfo SYMBOL() lines found and equal
};

struct KallsymsOptions {
    // Where the shape search starts without vmcoreinfo (x86_64's default
    // CONFIG_PHYSICAL_START, 16 MiB) and how far it reads.
    uint64_t scan_start = 0x1000000;
    uint64_t scan_bytes = 256ULL << 20;
    // Guest bytes the search may examine beyond its one pass over the
    // window: token tables, the walk back to relative_base, names, offsets
    // of candidate tables. A real kernel's tables need a few MiB; a guest
    // full of look-alikes spends the limit and the search gives up (about
    // a second of work at most).
    uint64_t work_limit = 256ULL << 20;
    // Set -> Error("cancelled"), checked per page and per MiB of work.
    const std::atomic<bool>* cancel = nullptr;
};

// What a search did (for tests and diagnostics).
struct KallsymsSearchStats {
    uint64_t index_candidates = 0;  // places holding a valid-looking kallsyms_token_index
    uint64_t table_candidates = 0;  // ... with a token table before it (walked back from)
    uint64_t work = 0;              // guest bytes examined beyond the pass (see work_limit)
    bool gave_up = false;           // the work limit was reached
};

// Finds and decodes kallsyms. With `vmcoreinfo`: its SYMBOL(kallsyms_*)
// lines (present in some kernels) are tried first, the search starts at
// _stext, phys_base comes from NUMBER(phys_base), and a table is accepted
// only if every SYMBOL() naming a kernel-image address that it holds has the
// same address. Without: phys_base is derived by matching linux_banner's
// address with "Linux version " text in memory. nullopt when nothing fits.
std::optional<Kallsyms> find_kallsyms(const PageReader& reader,
                                      const Vmcoreinfo* vmcoreinfo = nullptr,
                                      const KallsymsOptions& options = {},
                                      KallsymsSearchStats* stats = nullptr);

// The NUL-terminated linux_banner text ("Linux version ..."), read through
// the symbol table.
std::optional<std::string> read_linux_banner(PhysicalMemory& memory, const Kallsyms& kallsyms);

}  // namespace xendump::kernel
