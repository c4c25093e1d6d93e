// Kernel stack unwinding of an x86_64 Linux guest's vcpus (see backtrace.hpp):
// ORC (Linux arch/x86/kernel/unwind_orc.c unwind_next_frame), frame
// pointers (unwind_frame.c), and a conservative scan (dumpstack.c's "?"
// words). Stack layout facts: x86_64 THREAD_SIZE and IRQ_STACK_SIZE are
// 16 KiB and the stacks are aligned to their size; struct pt_regs is
// r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs flags sp ss
// (8 bytes each), and an iret frame is its last five words (ip at 128).
#include "xendump/kernel/backtrace.hpp"

#include <array>
#include <cstdio>
#include <cstring>

#include "xendump/text.hpp"

namespace xendump::kernel {
namespace {

constexpr uint64_t kStackBlock = 16384;
constexpr uint64_t kRegsIp = 128, kRegsCs = 136, kRegsSp = 152, kRegsBp = 32;
constexpr uint64_t kRegsR10 = 56, kRegsR13 = 16, kRegsDi = 112, kRegsDx = 96;
constexpr uint64_t kIretFrameOffset = kRegsIp;

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

bool same_stack(uint64_t a, uint64_t b) { return a / kStackBlock == b / kStackBlock; }

uint64_t start_reg(const ElfPrstatusX86_64::Regs& regs, uint64_t offset) {
    uint64_t v = 0;
    std::memcpy(&v, reinterpret_cast<const std::byte*>(&regs) + offset, sizeof v);
    return v;
}

// Where the registers of the interrupted code are (unwind_orc.c state->regs):
// the vcpu's own registers, or a struct pt_regs (full) or iret frame
// (partial) on the stack.
struct RegsRef {
    enum Kind { none, start, stack } kind = none;
    uint64_t address = 0;  // of the struct pt_regs (stack)
    bool full = false;
};

}  // namespace

std::string_view to_string(UnwindMethod m) {
    switch (m) {
        case UnwindMethod::orc: return "orc";
        case UnwindMethod::frame_pointer: return "frame-pointer";
        case UnwindMethod::stack_scan: return "stack-scan";
    }
    return "?";
}

UnwindStart unwind_start(const XenVcpuContextX86_64& ctx, format::GuestType type) {
    UnwindStart s;
    s.regs = prstatus_from_context(0, ctx, type).pr_reg;
    s.kernel_mode = type == format::GuestType::pv ? (ctx.flags & ctx.kFlagInKernel) != 0 : (ctx.cs & 3) == 0;
    return s;
}

KernelUnwinder::KernelUnwinder(const SymbolTable& symbols, VirtualReader read, std::optional<OrcTable> orc)
    : symbols_(symbols), read_(std::move(read)), orc_(std::move(orc)) {
    stext_ = symbols.address("_stext").value_or(0);
    etext_ = symbols.address("_etext").value_or(0);
    sinittext_ = symbols.address("_sinittext").value_or(0);
    einittext_ = symbols.address("_einittext").value_or(0);
}

bool KernelUnwinder::is_text(uint64_t a) const {
    return (a >= stext_ && a < etext_) || (a >= sinittext_ && a < einittext_);
}

std::string KernelUnwinder::symbolize(uint64_t address, bool return_address) const {
    if (!is_text(address)) return {};
    auto r = symbols_.resolve(return_address ? address - 1 : address);
    if (!r) return {};
    return r->symbol->name + "+" + hex(address - r->symbol->address);
}

std::optional<uint64_t> KernelUnwinder::word(uint64_t vaddr) const {
    uint64_t v = 0;
    if (vaddr % 8 != 0 || !read_(vaddr, std::as_writable_bytes(std::span(&v, 1)))) return std::nullopt;
    return v;
}

bool KernelUnwinder::after_call(uint64_t ret) const {
    // A return address follows a call: e8 rel32, or ff /2 (indirect, with a
    // register, a disp8/SIB, or a disp32/rip-relative operand).
    std::array<std::byte, 7> b{};
    if (ret < b.size() || !read_(ret - b.size(), b)) return false;
    auto at = [&b](size_t back) { return static_cast<uint8_t>(b[b.size() - back]); };
    if (at(5) == 0xe8) return true;
    for (size_t back : {2, 3, 6, 7})
        if (at(back) == 0xff && ((at(back - 1) >> 3) & 7) == 2) return true;
    return false;
}

BacktraceFrame KernelUnwinder::frame(uint64_t ip, uint64_t sp, bool exact, bool reliable) const {
    BacktraceFrame f;
    f.ip = ip;
    f.sp = sp;
    f.exact_ip = exact;
    f.reliable = reliable;
    f.symbol = symbolize(ip, !exact);
    return f;
}

Backtrace KernelUnwinder::unwind_orc(const UnwindStart& start, const BacktraceLimits& limits) const {
    Backtrace t;
    t.method = UnwindMethod::orc;
    if (!orc_) {
        t.stopped = "the kernel's ORC tables were not found";
        return t;
    }
    uint64_t ip = start.regs.ip, sp = start.regs.sp, bp = start.regs.bp;
    bool exact = true;
    RegsRef regs{RegsRef::start, 0, true}, prev_regs{};
    size_t switches = 0;
    t.frames.push_back(frame(ip, sp, true));

    auto reg_from = [&](const RegsRef& r, uint64_t offset) -> std::optional<uint64_t> {
        if (r.kind == RegsRef::start) return start_reg(start.regs, offset);
        if (r.kind == RegsRef::stack) return word(r.address + offset);
        return std::nullopt;
    };
    auto get_reg = [&](uint64_t offset) -> std::optional<uint64_t> {
        if (regs.kind == RegsRef::none) return std::nullopt;
        if (regs.full) return reg_from(regs, offset);
        if (prev_regs.kind != RegsRef::none) return reg_from(prev_regs, offset);
        return std::nullopt;
    };
    auto stop = [&t](std::string why) {
        t.stopped = std::move(why);
        return t;
    };

    while (true) {
        const std::string at = t.frames.back().symbol.empty() ? hex(ip) : t.frames.back().symbol;
        if (t.frames.size() >= limits.max_frames)
            return stop("more than " + std::to_string(limits.max_frames) + " frames: the walk was stopped");
        std::optional<OrcEntry> orc;
        if (is_text(ip)) orc = orc_->find(exact ? ip : ip - 1, read_);
        if (!orc) {
            // No ORC data (module code, a bad address): as the kernel does,
            // follow the frame pointer (sp = bp + 16, ip at bp + 8).
            orc = OrcEntry{16, -16, orc_reg::bp, orc_reg::prev_sp, OrcType::call, false};
        }
        if (orc->type == OrcType::end_of_stack) return t;
        if (orc->type == OrcType::undefined || orc->sp_reg == orc_reg::undefined)
            return stop("no unwind data for " + at + " (ORC entry undefined)");

        // The caller's stack pointer.
        uint64_t new_sp = 0;
        bool indirect = false;
        std::optional<uint64_t> base;
        switch (orc->sp_reg) {
            case orc_reg::sp: base = sp + static_cast<int64_t>(orc->sp_offset); break;
            case orc_reg::bp: base = bp + static_cast<int64_t>(orc->sp_offset); break;
            case orc_reg::sp_indirect: base = sp; indirect = true; break;
            case orc_reg::bp_indirect: base = bp + static_cast<int64_t>(orc->sp_offset); indirect = true; break;
            case orc_reg::r10: base = get_reg(kRegsR10); break;
            case orc_reg::r13: base = get_reg(kRegsR13); break;
            case orc_reg::di: base = get_reg(kRegsDi); break;
            case orc_reg::dx: base = get_reg(kRegsDx); break;
            default: return stop("unknown ORC sp register " + std::to_string(orc->sp_reg) + " at " + at);
        }
        if (!base) return stop("the register ORC names for the stack at " + at + " is not saved");
        new_sp = *base;
        if (indirect) {
            auto v = word(new_sp);
            if (!v) return stop("the stack pointer saved at " + hex(new_sp) + " (" + at + ") is not in the dump");
            new_sp = *v;
            if (orc->sp_reg == orc_reg::sp_indirect) new_sp += static_cast<int64_t>(orc->sp_offset);
        }

        // The caller's ip and stack pointer, and its saved registers.
        uint64_t new_ip = 0, frame_sp = 0, caller_sp = 0;
        bool new_exact = false;
        std::optional<uint64_t> cs;
        if (orc->type == OrcType::call) {
            frame_sp = new_sp - 8;
            auto v = word(frame_sp);
            if (!v) return stop("the return address at " + hex(frame_sp) + " (" + at + ") is not in the dump");
            new_ip = *v;
            caller_sp = new_sp;
            regs = {};
            prev_regs = {};
        } else {
            // regs: a struct pt_regs at new_sp; regs_partial: an iret frame.
            const uint64_t pt = orc->type == OrcType::regs ? new_sp : new_sp - kIretFrameOffset;
            auto vip = word(pt + kRegsIp), vsp = word(pt + kRegsSp);
            cs = word(pt + kRegsCs);
            if (!vip || !vsp || !cs)
                return stop("the registers saved at " + hex(pt) + " (" + at + ") are not in the dump");
            new_ip = *vip;
            caller_sp = *vsp;
            frame_sp = pt;
            new_exact = true;
            if (orc->type == OrcType::regs) {
                regs = {RegsRef::stack, pt, true};
                prev_regs = {};
            } else {
                if (regs.full) prev_regs = regs;
                regs = {RegsRef::stack, pt, false};
            }
        }
        new_exact = new_exact || orc->signal;

        // The caller's bp.
        switch (orc->bp_reg) {
            case orc_reg::undefined:
                if (auto v = get_reg(kRegsBp)) bp = *v;
                break;
            case orc_reg::prev_sp: {
                auto v = word(new_sp + static_cast<int64_t>(orc->bp_offset));
                if (!v) return stop("the frame pointer saved by " + at + " is not in the dump");
                bp = *v;
                break;
            }
            case orc_reg::bp: {
                auto v = word(bp + static_cast<int64_t>(orc->bp_offset));
                if (!v) return stop("the frame pointer saved by " + at + " is not in the dump");
                bp = *v;
                break;
            }
            default: return stop("unknown ORC bp register " + std::to_string(orc->bp_reg) + " at " + at);
        }

        if (cs && (*cs & 3) == 3) {  // pt_regs of user mode: the kernel stack ends here
            t.user_ip = new_ip;
            return t;
        }
        // A stack only grows up; leaving it (irq and exception stacks) is
        // bounded, so a hostile stack cannot loop.
        if (same_stack(caller_sp, sp) && caller_sp <= sp)
            return stop("the stack goes the wrong way at " + at + " (sp " + hex(sp) + " -> " + hex(caller_sp) + ")");
        if (!same_stack(caller_sp, sp) && ++switches > limits.max_stack_switches)
            return stop("more than " + std::to_string(limits.max_stack_switches) + " stack switches at " + at);
        if (!is_text(new_ip))
            return stop("the return address " + hex(new_ip) + " at " + hex(frame_sp) + " (" + at +
                        ") is not in the kernel's text");
        ip = new_ip;
        sp = caller_sp;
        exact = new_exact;
        t.frames.push_back(frame(ip, frame_sp, exact));
    }
}

Backtrace KernelUnwinder::unwind_frame_pointer(const UnwindStart& start, const BacktraceLimits& limits) const {
    Backtrace t;
    t.method = UnwindMethod::frame_pointer;
    t.frames.push_back(frame(start.regs.ip, start.regs.sp, true));
    uint64_t bp = start.regs.bp, floor = start.regs.sp;
    size_t switches = 0;
    while (bp != 0) {
        if (t.frames.size() >= limits.max_frames) {
            t.stopped = "more than " + std::to_string(limits.max_frames) + " frames: the walk was stopped";
            break;
        }
        if (same_stack(bp, floor) ? bp < floor : ++switches > limits.max_stack_switches) {
            t.stopped = "the frame pointer " + hex(bp) + " is below the stack pointer " + hex(floor) +
                        " or leaves the stack too often";
            break;
        }
        auto next = word(bp), ret = word(bp + 8);
        if (!next || !ret) {
            t.stopped = "the frame at " + hex(bp) + " is not in the dump (or not aligned)";
            break;
        }
        if (!is_text(*ret)) {
            // The bottom frame of a task holds no return address.
            if (*next != 0) t.stopped = "the return address " + hex(*ret) + " at " + hex(bp + 8) + " is not in the kernel's text";
            break;
        }
        t.frames.push_back(frame(*ret, bp + 8, false));
        if (*next != 0 && same_stack(*next, bp) && *next <= bp) {
            t.stopped = "the frame pointer goes the wrong way at " + hex(bp) + " (-> " + hex(*next) + ")";
            break;
        }
        floor = bp + 16;
        bp = *next;
    }
    return t;
}

Backtrace KernelUnwinder::scan_stack(const UnwindStart& start, const BacktraceLimits& limits) const {
    Backtrace t;
    t.method = UnwindMethod::stack_scan;
    t.frames.push_back(frame(start.regs.ip, start.regs.sp, true));
    const uint64_t from = (start.regs.sp + 7) & ~uint64_t{7};
    const uint64_t end = (from / kStackBlock + 1) * kStackBlock;  // the top of this stack
    size_t words = 0;
    for (uint64_t a = from; a < end && a >= from; a += 8) {
        if (++words > limits.max_scan_words || t.frames.size() >= limits.max_frames) {
            t.stopped = "the scan was stopped after " + std::to_string(words - 1) + " words";
            return t;
        }
        auto w = word(a);
        if (!w) {
            t.stopped = "the stack at " + hex(a) + " is not in the dump";
            return t;
        }
        if (is_text(*w) && after_call(*w)) t.frames.push_back(frame(*w, a, false, false));
    }
    return t;
}

Backtrace KernelUnwinder::unwind(const UnwindStart& start, const BacktraceLimits& limits) const {
    if (!start.kernel_mode) {
        Backtrace t;
        t.user_mode = true;
        t.user_ip = start.regs.ip;
        return t;
    }
    Backtrace t = orc_ ? unwind_orc(start, limits) : unwind_frame_pointer(start, limits);
    if (t.frames.size() > 1 || !t.partial()) return t;
    // ORC could not leave the first frame (no data for that code): the
    // frame pointers, when they lead anywhere.
    if (orc_) {
        Backtrace fp = unwind_frame_pointer(start, limits);
        if (fp.frames.size() > 1) {
            const std::string why = "no ORC unwind (" + t.stopped + "): the frame pointers were followed";
            fp.stopped = fp.stopped.empty() ? why : why + "; " + fp.stopped;
            return fp;
        }
    }
    Backtrace scan = scan_stack(start, limits);
    const std::string why = "no reliable unwind (" + std::string(to_string(t.method)) + ": " + t.stopped +
                            "): the stack was scanned for return addresses";
    scan.stopped = scan.stopped.empty() ? why : why + "; " + scan.stopped;
    return scan;
}

std::string format_frame(const BacktraceFrame& f) {
    // A symbol name is the guest's text (kallsyms in its pages): shown under
    // the one rule for guest text, as every human-readable output shows it.
    std::string s = f.reliable ? "" : "? ";
    return s + (f.symbol.empty() ? hex(f.ip) : escape_text(f.symbol));
}

std::string format_backtrace(const Backtrace& t) {
    if (t.user_mode) return "in user mode at " + hex(t.user_ip.value_or(0)) + "\n";
    std::string out;
    for (size_t i = 0; i < t.frames.size(); ++i) {
        const auto& f = t.frames[i];
        char head[64];
        std::snprintf(head, sizeof head, "#%-2zu [%016llx] ", i, static_cast<unsigned long long>(f.sp));
        out += head + format_frame(f) + " at " + hex(f.ip) + "\n";
    }
    if (t.user_ip) out += "    (user space at " + hex(*t.user_ip) + ")\n";
    if (t.method == UnwindMethod::stack_scan)
        out += "    (a stack scan: \"?\" frames are return addresses found on the stack, not a verified chain)\n";
    if (t.partial()) out += "    (partial: " + escape_text(t.stopped) + ")\n";
    return out;
}

std::string summarize_backtrace(const Backtrace& t, size_t count) {
    if (t.user_mode) return "user mode at " + hex(t.user_ip.value_or(0));
    std::string out;
    size_t n = 0;
    for (const auto& f : t.frames) {
        if (n == count) break;
        if (!f.reliable) continue;
        if (!out.empty()) out += " < ";
        out += format_frame(f);
        ++n;
    }
    return out;
}

}  // namespace xendump::kernel
