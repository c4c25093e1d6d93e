// Backtraces of an x86_64 Linux guest's vcpus from their saved registers and
// their kernel stacks in guest memory, without a vmlinux:
//  - with the kernel's own ORC unwind tables where kallsyms reaches them
//    (__start_orc_unwind_ip .. __stop_orc_unwind_ip: s32 offsets relative to
//    each entry, sorted; __start_orc_unwind: 6-byte entries, one per ip;
//    orc_lookup/lookup_num_blocks: per 256 bytes of text from _stext, the
//    first entry to search), the walk Linux's arch/x86/kernel/unwind_orc.c
//    does: the rightmost entry whose ip <= the frame's ip (ip - 1 for a
//    return address), then the caller's sp from sp_reg + sp_offset, its ip
//    from below that sp (a call) or from the saved pt_regs there (an
//    interrupt, exception or system call entry), its bp from bp_reg;
//  - else by the frame-pointer chain (rbp -> saved rbp, return address);
//  - else (or when the walk cannot leave the first frame) by a conservative
//    scan of the stack for return addresses, marked as such ("?" frames, as
//    the kernel prints the words of a stack it could not unwind).
// ORC entry format (Linux arch/x86/include/asm/orc_types.h): s16 sp_offset,
// s16 bp_offset, then 16 bits: sp_reg:4, bp_reg:4, and
//   Linux 4.14 .. 6.2: type:2 (call 0, regs 1, regs_partial 2), end:1;
//   Linux 6.3:         type:2, signal:1, end:1;
//   Linux 6.4 and later: type:3 (undefined 0, end_of_stack 1, call 2,
//                      regs 3, regs_partial 4), signal:1.
// Everything read from the guest is untrusted: every read is checked, the
// stack pointer must grow within a stack, stack switches, frames and words
// scanned are bounded, and a walk that stops early says why (partial).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xendump/kernel/kallsyms.hpp"
#include "xendump/kernel/printk_log.hpp"
#include "xendump/kernel/prstatus.hpp"

namespace xendump::kernel {

enum class OrcVersion {
    v1,  // Linux 4.14 .. 6.2
    v2,  // Linux 6.3
    v3,  // Linux 6.4 and later
};

// The ORC format of a kernel release ("6.1.0-57-amd64"); v3 when unknown.
OrcVersion orc_version_for_release(std::string_view release);

enum class OrcType { call, regs, regs_partial, end_of_stack, undefined };

struct OrcEntry {
    int16_t sp_offset = 0, bp_offset = 0;
    unsigned sp_reg = 0, bp_reg = 0;
    OrcType type = OrcType::call;
    bool signal = false;  // the next frame's ip is exact (not a return address)

    static OrcEntry decode(std::span<const std::byte, 6> raw, OrcVersion version);
};

// ORC register numbers (orc_types.h, every version).
namespace orc_reg {
inline constexpr unsigned undefined = 0, prev_sp = 1, dx = 2, di = 3, bp = 4, sp = 5, r10 = 6, r13 = 7,
                          bp_indirect = 8, sp_indirect = 9;
}

// The kernel's ORC tables in guest memory, located through kallsyms.
class OrcTable {
public:
    static constexpr uint64_t kMaxEntries = uint64_t{1} << 24;  // a kernel has a few 100 000

    // nullopt when kallsyms lacks the symbols or they describe no plausible
    // table (sizes that disagree, more than kMaxEntries).
    static std::optional<OrcTable> locate(const SymbolTable& symbols, OrcVersion version);

    // The entry for `ip` (the rightmost one whose ip <= `ip`, as the kernel
    // searches), nullopt when the tables cannot be read there or `ip` is
    // before the first entry.
    std::optional<OrcEntry> find(uint64_t ip, const VirtualReader& read) const;

    uint64_t entries() const { return count_; }
    OrcVersion version() const { return version_; }

private:
    std::optional<uint64_t> ip_at(uint64_t index, const VirtualReader& read) const;
    std::optional<OrcEntry> search(uint64_t first, uint64_t last, uint64_t ip, const VirtualReader& read) const;

    uint64_t ip_table_ = 0, entry_table_ = 0, count_ = 0;
    OrcVersion version_ = OrcVersion::v3;
    // The fast lookup (orc_lookup[], lookup_num_blocks), when kallsyms has it.
    uint64_t lookup_ = 0, lookup_num_blocks_at_ = 0, text_start_ = 0, text_end_ = 0;
};

enum class UnwindMethod { orc, frame_pointer, stack_scan };
std::string_view to_string(UnwindMethod m);

struct BacktraceFrame {
    uint64_t ip = 0;          // the vcpu's ip (first frame, or after saved registers), else a return address
    uint64_t sp = 0;          // the stack pointer in this frame (where the return address was, for a call)
    std::string symbol;       // "name+0xoff" (for a return address: the function holding ip - 1); "" outside kernel text
    bool reliable = true;     // false: a word found by scanning ("?" frame)
    bool exact_ip = false;    // ip is where execution stopped (first frame, or from saved pt_regs)
};

struct Backtrace {
    UnwindMethod method = UnwindMethod::stack_scan;
    std::vector<BacktraceFrame> frames;
    bool user_mode = false;              // the vcpu was in user mode: no kernel frames
    std::optional<uint64_t> user_ip;     // where the walk reached user space (pt_regs of a system call or interrupt)
    // Why the walk ended early, one sentence ("" when it reached the end of
    // the stack: a user-mode pt_regs, the ORC end marker, or bp 0).
    std::string stopped;
    bool partial() const { return !stopped.empty(); }
};

struct BacktraceLimits {
    size_t max_frames = 64;
    size_t max_stack_switches = 8;       // task -> irq/exception stacks and back
    size_t max_scan_words = 2048;        // one 16 KiB stack
};

// The registers an unwind starts from: pt_regs order (user_regs_struct,
// ElfPrstatusX86_64::Regs), and whether the vcpu was in kernel mode (a PV
// guest's kernel runs in ring 3: its context's VGCF_in_kernel says).
struct UnwindStart {
    ElfPrstatusX86_64::Regs regs{};
    bool kernel_mode = true;
};

UnwindStart unwind_start(const XenVcpuContextX86_64& ctx, format::GuestType type);

class KernelUnwinder {
public:
    // `symbols` and `read` must outlive the unwinder; `orc` nullopt: no ORC.
    KernelUnwinder(const SymbolTable& symbols, VirtualReader read, std::optional<OrcTable> orc);

    // ORC when there is a table, else frame pointers; when ORC cannot leave
    // the first frame, frame pointers, and when neither can, a stack scan.
    Backtrace unwind(const UnwindStart& start, const BacktraceLimits& limits = {}) const;

    Backtrace unwind_orc(const UnwindStart& start, const BacktraceLimits& limits = {}) const;
    Backtrace unwind_frame_pointer(const UnwindStart& start, const BacktraceLimits& limits = {}) const;
    Backtrace scan_stack(const UnwindStart& start, const BacktraceLimits& limits = {}) const;

    bool has_orc() const { return orc_.has_value(); }
    // Inside the kernel's text (_stext.._etext, _sinittext.._einittext).
    bool is_text(uint64_t address) const;
    // "name+0xoff"; `return_address`: the function holding address - 1.
    std::string symbolize(uint64_t address, bool return_address) const;

private:
    std::optional<uint64_t> word(uint64_t vaddr) const;
    bool after_call(uint64_t return_address) const;
    BacktraceFrame frame(uint64_t ip, uint64_t sp, bool exact, bool reliable = true) const;

    const SymbolTable& symbols_;
    VirtualReader read_;
    std::optional<OrcTable> orc_;
    uint64_t stext_ = 0, etext_ = 0, sinittext_ = 0, einittext_ = 0;
};

// One frame as the kernel prints it in a trace: "name+0xoff" with "? "
// before an unreliable one, the address when there is no symbol; the name
// escaped (escape_text, xendump/text.hpp: it is the guest's text).
std::string format_frame(const BacktraceFrame& frame);

// The trace as text, one frame a line ("#0 [sp] name+0xoff at ip"), then
// the end of the walk (user space, or why it stopped).
std::string format_backtrace(const Backtrace& trace);

// The first `count` reliable frames' symbols, joined by " < " (innermost
// first): the crashing vcpu's top frames for a journal entry.
std::string summarize_backtrace(const Backtrace& trace, size_t count);

}  // namespace xendump::kernel
