// libFuzzer target: the vcpu unwinder (kernel/backtrace.hpp) over a guest
// whose kernel memory is the input. The first 24 bytes are the vcpu's rip,
// rsp and rbp as offsets into the rest, which is mapped at kBase: its first
// half is the kernel's text (_stext.._etext), its second half holds the ORC
// tables (__start_orc_unwind_ip: 1/8 of it, then __start_orc_unwind) and is
// the stack too; the ORC version comes from the low bits of rip's offset.
// Every walk must end: partial traces are the expected outcome; crashes,
// hangs, UB and unbounded memory are the bugs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "xendump/kernel/backtrace.hpp"

namespace {

constexpr uint64_t kBase = 0xffffffff81000000ULL;

uint64_t load(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace xendump::kernel;
    if (size < 24 + 64) return 0;
    const std::span<const uint8_t> memory(data + 24, size - 24);
    const uint64_t n = memory.size();
    auto read = [memory](uint64_t vaddr, std::span<std::byte> out) {
        if (vaddr < kBase || vaddr - kBase > memory.size() || memory.size() - (vaddr - kBase) < out.size())
            return false;
        std::memcpy(out.data(), memory.data() + (vaddr - kBase), out.size());
        return true;
    };
    const uint64_t half = kBase + n / 2, ip_table = half, entries = (n / 2) / 8 / 4;
    const SymbolTable symbols({{"_stext", kBase, 'T'},
                               {"fuzz_function", kBase + 16, 'T'},
                               {"_etext", half, 'T'},
                               {"__start_orc_unwind_ip", ip_table, 'R'},
                               {"__stop_orc_unwind_ip", ip_table + entries * 4, 'R'},
                               {"__start_orc_unwind", ip_table + entries * 4, 'R'},
                               {"__stop_orc_unwind", ip_table + entries * 10, 'R'}});
    static constexpr OrcVersion kVersions[] = {OrcVersion::v1, OrcVersion::v2, OrcVersion::v3, OrcVersion::v1};
    const uint64_t rip = load(data), rsp = load(data + 8), rbp = load(data + 16);
    const OrcVersion version = kVersions[rip & 3];
    UnwindStart start;
    start.regs.ip = kBase + rip % n;
    start.regs.sp = kBase + rsp % n;
    start.regs.bp = rbp & 1 ? rbp : kBase + rbp % n;  // also pointers anywhere
    const KernelUnwinder with_orc(symbols, read, OrcTable::locate(symbols, version));
    const KernelUnwinder without(symbols, read, std::nullopt);
    for (const KernelUnwinder* u : {&with_orc, &without}) {
        const Backtrace t = u->unwind(start);
        if (t.frames.size() > BacktraceLimits{}.max_frames) __builtin_trap();
        (void)format_backtrace(t);
        (void)u->scan_stack(start);
    }
    return 0;
}
