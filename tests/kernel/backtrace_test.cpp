// The vcpu unwinder (libdump kernel/backtrace.hpp) on guest kernels built by
// the test: a text segment with call sites, kallsyms-like symbols, ORC
// tables in each format version (with and without the orc_lookup fast
// table), and kernel stacks the unwinder must walk exactly; then the
// frame-pointer and stack-scan fallbacks, and hostile stacks.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "fake_kernel_memory.hpp"
#include "guest_ram.hpp"
#include "test_support.hpp"
#include "xendump/kernel/backtrace.hpp"
#include "xendump/kernel/virtual_memory.hpp"

namespace xendump::kernel {
namespace {

constexpr uint64_t kText = 0xffffffff81000000ULL;
constexpr uint64_t kTextEnd = kText + 0x10000;
constexpr uint64_t kTop = kText + 0x1000, kMid = kText + 0x2000, kBottom = kText + 0x3000,
                   kEntry = kText + 0x4000, kThreadStart = kText + 0x5000, kNoData = kText + 0x6000;
constexpr uint64_t kOrcIp = 0xffffffff82000000ULL;     // __start_orc_unwind_ip
constexpr uint64_t kOrcData = 0xffffffff82100000ULL;   // __start_orc_unwind
constexpr uint64_t kLookup = 0xffffffff82200000ULL;    // orc_lookup
constexpr uint64_t kBlocks = 0xffffffff82300000ULL;    // lookup_num_blocks
constexpr uint64_t kStack = 0xffffc90000010000ULL;     // a 16 KiB task stack
constexpr uint64_t kStackTop = kStack + 0x4000;

using Memory = test::FakeKernelMemory;

struct Orc {
    uint64_t ip;
    int16_t sp_offset, bp_offset;
    unsigned sp_reg, bp_reg;
    OrcType type;
    bool end = false;
};

// The 16 flag bits of an entry in `version`'s layout.
uint16_t flags_of(const Orc& o, OrcVersion version) {
    unsigned f = o.sp_reg | o.bp_reg << 4;
    if (version == OrcVersion::v3) {
        const unsigned type = o.end ? 1
                              : o.type == OrcType::call ? 2
                              : o.type == OrcType::regs ? 3
                              : o.type == OrcType::regs_partial ? 4 : 0;
        return static_cast<uint16_t>(f | type << 8);
    }
    const unsigned type = o.type == OrcType::call ? 0 : o.type == OrcType::regs ? 1 : 2;
    f |= type << 8;
    if (o.end) f |= version == OrcVersion::v1 ? 0x400 : 0x800;
    return static_cast<uint16_t>(f);
}

// A guest kernel: text whose return addresses follow calls, symbols, and
// (with `orc`) its ORC tables.
struct Guest {
    Memory memory;
    std::vector<KernelSymbol> symbols;
    SymbolTable table;

    explicit Guest(const std::vector<Orc>& orc, OrcVersion version, bool lookup = false) {
        memory.map(kText, kTextEnd - kText);
        memory.map(kStack, kStackTop - kStack);
        symbols = {{"_stext", kText, 'T'},           {"top_function", kTop, 'T'},
                   {"middle_function", kMid, 'T'},   {"bottom_function", kBottom, 'T'},
                   {"entry_SYSCALL_64", kEntry, 'T'}, {"ret_from_fork", kThreadStart, 'T'},
                   {"no_orc_function", kNoData, 'T'}, {"_etext", kTextEnd, 'T'}};
        if (orc.empty()) {
            table = SymbolTable(symbols);
            return;
        }
        memory.map(kOrcIp, orc.size() * 4);
        memory.map(kOrcData, orc.size() * 6);
        for (size_t i = 0; i < orc.size(); ++i) {
            memory.put<int32_t>(kOrcIp + 4 * i, static_cast<int32_t>(orc[i].ip - (kOrcIp + 4 * i)));
            memory.put<int16_t>(kOrcData + 6 * i, orc[i].sp_offset);
            memory.put<int16_t>(kOrcData + 6 * i + 2, orc[i].bp_offset);
            memory.put<uint16_t>(kOrcData + 6 * i + 4, flags_of(orc[i], version));
        }
        symbols.push_back({"__start_orc_unwind_ip", kOrcIp, 'R'});
        symbols.push_back({"__stop_orc_unwind_ip", kOrcIp + 4 * orc.size(), 'R'});
        symbols.push_back({"__start_orc_unwind", kOrcData, 'R'});
        symbols.push_back({"__stop_orc_unwind", kOrcData + 6 * orc.size(), 'R'});
        if (lookup) {
            // orc_lookup[block]: the last entry starting at or before the block.
            const uint64_t blocks = (kTextEnd - kText) / 256 + 1;
            memory.map(kLookup, blocks * 4);
            memory.map(kBlocks, 4);
            memory.put<uint32_t>(kBlocks, static_cast<uint32_t>(blocks));
            for (uint64_t b = 0; b < blocks; ++b) {
                uint32_t idx = 0;
                for (size_t i = 0; i < orc.size(); ++i)
                    if (orc[i].ip <= kText + b * 256) idx = static_cast<uint32_t>(i);
                memory.put<uint32_t>(kLookup + 4 * b, idx);
            }
            symbols.push_back({"orc_lookup", kLookup, 'B'});
            symbols.push_back({"lookup_num_blocks", kBlocks, 'd'});
        }
        table = SymbolTable(symbols);
    }
    // A call instruction (e8 rel32) ending at `ret`.
    void call_before(uint64_t ret) { memory.put<uint8_t>(ret - 5, 0xe8); }

    KernelUnwinder unwinder(OrcVersion version) {
        return KernelUnwinder(table, memory.reader(), OrcTable::locate(table, version));
    }
};

// top_function (saved 16 bytes) <- middle_function (rbp frame) <-
// bottom_function (no pushes) <- entry_SYSCALL_64 (pt_regs of user mode),
// with a weak terminator entry at no_orc_function.
std::vector<Orc> syscall_orc() {
    return {
        {kTop, 24, 0, orc_reg::sp, orc_reg::undefined, OrcType::call},
        {kMid, 16, -16, orc_reg::bp, orc_reg::prev_sp, OrcType::call},
        {kBottom, 8, 0, orc_reg::sp, orc_reg::undefined, OrcType::call},
        {kEntry, 0, 0, orc_reg::sp, orc_reg::undefined, OrcType::regs},
        {kThreadStart, 0, 0, orc_reg::undefined, orc_reg::undefined, OrcType::call, true},
        {kNoData, 0, 0, orc_reg::undefined, orc_reg::undefined, OrcType::call},
    };
}

constexpr uint64_t kUserIp = 0x401000, kUserSp = 0x7ffe0000;

// The stack of that chain; returns the registers of the vcpu (in top_function).
UnwindStart build_syscall_stack(Guest& g) {
    const uint64_t s0 = kStackTop - 0x400;           // rsp in top_function
    const uint64_t b1 = s0 + 24 + 32;                // middle_function's frame (its locals between)
    g.memory.put<uint64_t>(s0 + 16, kMid + 0x20);    // top_function's return address
    g.call_before(kMid + 0x20);
    g.memory.put<uint64_t>(b1, 0x1234);              // the bp bottom_function's caller had
    g.memory.put<uint64_t>(b1 + 8, kBottom + 0x30);  // middle_function's return address
    g.call_before(kBottom + 0x30);
    g.memory.put<uint64_t>(b1 + 16, kEntry + 0x40);  // bottom_function's return address
    g.call_before(kEntry + 0x40);
    const uint64_t regs = b1 + 24;                   // struct pt_regs of the system call
    g.memory.put<uint64_t>(regs + 128, kUserIp);
    g.memory.put<uint64_t>(regs + 136, 0x33);
    g.memory.put<uint64_t>(regs + 152, kUserSp);
    UnwindStart start;
    start.regs.ip = kTop + 0x10;
    start.regs.sp = s0;
    start.regs.bp = b1;
    start.kernel_mode = true;
    return start;
}

std::vector<std::string> names(const Backtrace& t) {
    std::vector<std::string> out;
    for (const auto& f : t.frames) out.push_back(format_frame(f));
    return out;
}

const std::vector<std::string> kSyscallFrames = {"top_function+0x10", "middle_function+0x20",
                                                 "bottom_function+0x30", "entry_SYSCALL_64+0x40"};

class OrcWalk : public ::testing::TestWithParam<std::tuple<OrcVersion, bool>> {};

TEST_P(OrcWalk, WalksTheSyntheticStackExactly) {
    const auto [version, lookup] = GetParam();
    Guest g(syscall_orc(), version, lookup);
    const UnwindStart start = build_syscall_stack(g);
    const Backtrace t = g.unwinder(version).unwind(start);
    EXPECT_EQ(t.method, UnwindMethod::orc);
    EXPECT_EQ(names(t), kSyscallFrames);
    ASSERT_EQ(t.frames.size(), 4u);
    EXPECT_EQ(t.frames[0].sp, start.regs.sp);
    EXPECT_EQ(t.frames[1].sp, start.regs.sp + 16);      // where the return address was
    EXPECT_EQ(t.frames[2].sp, start.regs.bp + 8);
    EXPECT_EQ(t.frames[3].sp, start.regs.bp + 16);
    EXPECT_TRUE(t.frames[0].exact_ip);
    EXPECT_FALSE(t.frames[1].exact_ip);
    EXPECT_EQ(t.user_ip, kUserIp);
    EXPECT_FALSE(t.partial()) << t.stopped;
}

INSTANTIATE_TEST_SUITE_P(Versions, OrcWalk,
                         ::testing::Combine(::testing::Values(OrcVersion::v1, OrcVersion::v2, OrcVersion::v3),
                                            ::testing::Bool()));

TEST(OrcVersion, FollowsTheKernelRelease) {
    EXPECT_EQ(orc_version_for_release("6.1.0-57-amd64"), OrcVersion::v1);
    EXPECT_EQ(orc_version_for_release("4.19.0-27-amd64"), OrcVersion::v1);
    EXPECT_EQ(orc_version_for_release("6.3.7"), OrcVersion::v2);
    EXPECT_EQ(orc_version_for_release("6.4.0"), OrcVersion::v3);
    EXPECT_EQ(orc_version_for_release("6.12.9+bpo-amd64"), OrcVersion::v3);
    EXPECT_EQ(orc_version_for_release(""), OrcVersion::v3);
}

TEST(OrcEntry, DecodesEachVersionsBits) {
    // sp_reg bp (4), bp_reg prev_sp (1), sp_offset 16, bp_offset -16.
    const std::array<std::byte, 6> v1_regs_end = {std::byte{0x10}, std::byte{0}, std::byte{0xf0}, std::byte{0xff},
                                                  std::byte{0x14}, std::byte{0x05}};  // type 1 (regs), end
    auto e = OrcEntry::decode(std::span<const std::byte, 6>(v1_regs_end), OrcVersion::v1);
    EXPECT_EQ(e.sp_offset, 16);
    EXPECT_EQ(e.bp_offset, -16);
    EXPECT_EQ(e.sp_reg, orc_reg::bp);
    EXPECT_EQ(e.bp_reg, orc_reg::prev_sp);
    EXPECT_EQ(e.type, OrcType::regs);  // end only with no sp register
    EXPECT_TRUE(e.signal);
    const std::array<std::byte, 6> v3_end = {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
                                             std::byte{0x01}};
    EXPECT_EQ(OrcEntry::decode(std::span<const std::byte, 6>(v3_end), OrcVersion::v3).type, OrcType::end_of_stack);
    EXPECT_EQ(OrcEntry::decode(std::span<const std::byte, 6>(v3_end), OrcVersion::v1).type, OrcType::regs);
    const std::array<std::byte, 6> v2_call_signal = {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
                                                     std::byte{0x05}, std::byte{0x04}};
    e = OrcEntry::decode(std::span<const std::byte, 6>(v2_call_signal), OrcVersion::v2);
    EXPECT_EQ(e.type, OrcType::call);
    EXPECT_TRUE(e.signal);
}

TEST(OrcWalk, AReturnAddressAtTheNextFunctionIsLookedUpAsItsCaller) {
    // bottom_function ends with its call (a noreturn callee): the return
    // address is entry_SYSCALL_64's first byte, but the frame is
    // bottom_function's (ORC and the name are looked up at ip - 1, as %pB).
    Guest g(syscall_orc(), OrcVersion::v1);
    const UnwindStart start = build_syscall_stack(g);
    g.memory.put<uint64_t>(start.regs.bp + 8, kEntry);
    g.call_before(kEntry);
    const Backtrace t = g.unwinder(OrcVersion::v1).unwind(start);
    EXPECT_EQ(names(t), (std::vector<std::string>{"top_function+0x10", "middle_function+0x20",
                                                  "bottom_function+0x1000", "entry_SYSCALL_64+0x40"}));
    EXPECT_EQ(t.user_ip, kUserIp);
}

TEST(OrcWalkEnd, AKernelThreadEndsAtTheEndMarker) {
    Guest g(syscall_orc(), OrcVersion::v1);
    UnwindStart start = build_syscall_stack(g);
    g.memory.put<uint64_t>(start.regs.bp + 16, kThreadStart + 0x8);  // bottom_function called from ret_from_fork
    g.call_before(kThreadStart + 0x8);
    const Backtrace t = g.unwinder(OrcVersion::v1).unwind(start);
    EXPECT_EQ(names(t), (std::vector<std::string>{"top_function+0x10", "middle_function+0x20",
                                                  "bottom_function+0x30", "ret_from_fork+0x8"}));
    EXPECT_FALSE(t.partial()) << t.stopped;
    EXPECT_FALSE(t.user_ip);
}

TEST(OrcWalkEnd, InterruptedKernelCodeContinuesFromItsSavedRegisters) {
    // An interrupt's pt_regs (kernel mode) at the bottom of bottom_function's
    // frame: the walk resumes at the exact ip they hold, with their bp.
    auto orc = syscall_orc();
    orc[3] = {kEntry, 0, 0, orc_reg::sp, orc_reg::undefined, OrcType::regs};
    Guest g(orc, OrcVersion::v1);
    UnwindStart start = build_syscall_stack(g);
    const uint64_t regs = start.regs.bp + 24;
    const uint64_t interrupted_sp = regs + 168 + 64;
    g.memory.put<uint64_t>(regs + 128, kTop + 0x7);  // interrupted in top_function
    g.memory.put<uint64_t>(regs + 136, 0x10);        // kernel cs
    g.memory.put<uint64_t>(regs + 152, interrupted_sp);
    g.memory.put<uint64_t>(regs + 32, 0x5555);       // its bp
    g.memory.put<uint64_t>(interrupted_sp + 16, kThreadStart + 0x8);
    g.call_before(kThreadStart + 0x8);
    const Backtrace t = g.unwinder(OrcVersion::v1).unwind(start);
    EXPECT_EQ(names(t), (std::vector<std::string>{"top_function+0x10", "middle_function+0x20",
                                                  "bottom_function+0x30", "entry_SYSCALL_64+0x40",
                                                  "top_function+0x7", "ret_from_fork+0x8"}));
    ASSERT_EQ(t.frames.size(), 6u);
    EXPECT_TRUE(t.frames[4].exact_ip);
    EXPECT_FALSE(t.partial()) << t.stopped;
}

TEST(FramePointerWalk, FollowsTheChainWithoutOrcTables) {
    Guest g({}, OrcVersion::v1);
    const uint64_t s0 = kStackTop - 0x800, b0 = s0 + 0x40, b1 = b0 + 0x80;
    g.memory.put<uint64_t>(b0, b1);
    g.memory.put<uint64_t>(b0 + 8, kMid + 0x20);
    g.memory.put<uint64_t>(b1, 0);
    g.memory.put<uint64_t>(b1 + 8, kBottom + 0x30);
    UnwindStart start;
    start.regs.ip = kTop + 0x10;
    start.regs.sp = s0;
    start.regs.bp = b0;
    auto u = g.unwinder(OrcVersion::v1);
    EXPECT_FALSE(u.has_orc());
    const Backtrace t = u.unwind(start);
    EXPECT_EQ(t.method, UnwindMethod::frame_pointer);
    EXPECT_EQ(names(t), (std::vector<std::string>{"top_function+0x10", "middle_function+0x20", "bottom_function+0x30"}));
    EXPECT_EQ(t.frames[2].sp, b1 + 8);
    EXPECT_FALSE(t.partial()) << t.stopped;
}

TEST(FramePointerWalk, TakesOverWhenOrcHasNoDataForTheFirstFrame) {
    Guest g(syscall_orc(), OrcVersion::v1);
    const uint64_t s0 = kStackTop - 0x800, b0 = s0 + 0x40;
    g.memory.put<uint64_t>(b0, 0);
    g.memory.put<uint64_t>(b0 + 8, kMid + 0x20);
    UnwindStart start;
    start.regs.ip = kNoData + 0x3;
    start.regs.sp = s0;
    start.regs.bp = b0;
    const Backtrace t = g.unwinder(OrcVersion::v1).unwind(start);
    EXPECT_EQ(t.method, UnwindMethod::frame_pointer);
    EXPECT_EQ(names(t), (std::vector<std::string>{"no_orc_function+0x3", "middle_function+0x20"}));
    EXPECT_NE(t.stopped.find("no ORC unwind (no unwind data for no_orc_function+0x3"), std::string::npos)
        << t.stopped;
}

TEST(StackScan, MarksReturnAddressesFoundOnTheStackWhenNoWalkLeavesTheFirstFrame) {
    // No ORC data for the vcpu's function and no frame pointer: a scan of
    // the stack keeps only words after a call instruction, as "?" frames.
    Guest g(syscall_orc(), OrcVersion::v1);
    const uint64_t s0 = kStackTop - 0x100;
    g.memory.put<uint64_t>(s0 + 8, kMid + 0x20);      // after a call
    g.call_before(kMid + 0x20);
    g.memory.put<uint64_t>(s0 + 16, kBottom + 0x11);  // text, but no call before it
    g.memory.put<uint64_t>(s0 + 24, 0xdeadbeef);      // not text
    g.memory.put<uint64_t>(s0 + 48, kEntry + 0x40);
    g.call_before(kEntry + 0x40);
    UnwindStart start;
    start.regs.ip = kNoData + 0x3;
    start.regs.sp = s0;
    const Backtrace t = g.unwinder(OrcVersion::v1).unwind(start);
    EXPECT_EQ(t.method, UnwindMethod::stack_scan);
    EXPECT_EQ(names(t), (std::vector<std::string>{"no_orc_function+0x3", "? middle_function+0x20",
                                                  "? entry_SYSCALL_64+0x40"}));
    EXPECT_TRUE(t.partial());
    EXPECT_NE(t.stopped.find("no reliable unwind"), std::string::npos) << t.stopped;
    EXPECT_NE(format_backtrace(t).find("a stack scan"), std::string::npos);
    EXPECT_EQ(summarize_backtrace(t, 5), "no_orc_function+0x3");
}

TEST(Symbols, AnAliasedAddressIsNamedByItsFirstSymbolAsTheKernelDoes) {
    // kallsyms order puts default_idle before the section marker at its address.
    const SymbolTable t({{"default_idle", kTop, 'T'}, {"__cpuidle_text_start", kTop, 'T'}, {"later", kMid, 'T'}});
    EXPECT_EQ(t.describe(kTop + 0xa), "default_idle+0xa");
    EXPECT_EQ(t.describe(kTop), "default_idle");
    EXPECT_EQ(t.describe(kMid + 1), "later+0x1");
}

TEST(UserMode, AVcpuInUserModeHasNoKernelFrames) {
    Guest g(syscall_orc(), OrcVersion::v1);
    UnwindStart start;
    start.regs.ip = kUserIp;
    start.kernel_mode = false;
    const Backtrace t = g.unwinder(OrcVersion::v1).unwind(start);
    EXPECT_TRUE(t.user_mode);
    EXPECT_TRUE(t.frames.empty());
    EXPECT_EQ(summarize_backtrace(t, 3), "user mode at 0x401000");
}

TEST(UnwindStartFromXen, PvKernelModeIsTheInKernelFlagNotTheRing) {
    XenVcpuContextX86_64 ctx{};
    ctx.rip = kTop;
    ctx.rsp = kStack + 8;
    ctx.rbp = kStack + 16;
    ctx.cs = 0xe033;  // a 64-bit PV kernel runs in ring 3
    ctx.flags = XenVcpuContextX86_64::kFlagInKernel;
    auto s = unwind_start(ctx, format::GuestType::pv);
    EXPECT_TRUE(s.kernel_mode);
    EXPECT_EQ(s.regs.ip, kTop);
    EXPECT_EQ(s.regs.sp, kStack + 8);
    EXPECT_EQ(s.regs.bp, kStack + 16);
    ctx.flags = 0;
    EXPECT_FALSE(unwind_start(ctx, format::GuestType::pv).kernel_mode);
    EXPECT_FALSE(unwind_start(ctx, format::GuestType::hvm).kernel_mode);
    ctx.cs = 0x10;
    EXPECT_TRUE(unwind_start(ctx, format::GuestType::hvm).kernel_mode);
}

// Hostile stacks: every walk ends, marked partial, saying why.
TEST(HostileStack, AReturnAddressPointingBackDownTheStackIsALoop) {
    // top_function's "caller" is itself with the same stack pointer.
    auto orc = syscall_orc();
    orc[0] = {kTop, 0, 0, orc_reg::sp, orc_reg::undefined, OrcType::call};
    Guest g(orc, OrcVersion::v1);
    UnwindStart start = build_syscall_stack(g);
    g.memory.put<uint64_t>(start.regs.sp - 8, kTop + 0x10);
    g.call_before(kTop + 0x10);
    const auto u = g.unwinder(OrcVersion::v1);
    const Backtrace t = u.unwind_orc(start);
    EXPECT_TRUE(t.partial());
    EXPECT_NE(t.stopped.find("wrong way"), std::string::npos) << t.stopped;
    EXPECT_EQ(t.frames.size(), 1u);
    // unwind() then follows the frame pointers, saying why.
    const Backtrace scan = u.unwind(start);
    EXPECT_EQ(scan.method, UnwindMethod::frame_pointer);
    EXPECT_NE(scan.stopped.find("wrong way"), std::string::npos) << scan.stopped;
}

TEST(HostileStack, PointersOutOfRangeEndTheWalk) {
    Guest g(syscall_orc(), OrcVersion::v1);
    UnwindStart start = build_syscall_stack(g);
    // middle_function's frame pointer points outside any mapped memory.
    start.regs.bp = 0xffff888000000000ULL;
    Backtrace t = g.unwinder(OrcVersion::v1).unwind(start);
    EXPECT_TRUE(t.partial());
    EXPECT_EQ(names(t), (std::vector<std::string>{"top_function+0x10", "middle_function+0x20"}));
    EXPECT_NE(t.stopped.find("not in the dump"), std::string::npos) << t.stopped;

    // A return address outside the kernel's text.
    Guest h(syscall_orc(), OrcVersion::v1);
    start = build_syscall_stack(h);
    h.memory.put<uint64_t>(start.regs.bp + 8, 0xffffffffdeadbeefULL);
    t = h.unwinder(OrcVersion::v1).unwind(start);
    EXPECT_TRUE(t.partial());
    EXPECT_EQ(t.frames.size(), 2u);
    EXPECT_NE(t.stopped.find("not in the kernel's text"), std::string::npos) << t.stopped;

    // The stack pointer itself out of range: nothing to read, a scan finds nothing.
    start.regs.sp = 0x10;
    t = h.unwinder(OrcVersion::v1).unwind(start);
    EXPECT_TRUE(t.partial());
    EXPECT_EQ(t.frames.size(), 1u);
}

TEST(HostileStack, AFramePointerLoopIsStopped) {
    Guest g({}, OrcVersion::v1);
    const uint64_t b0 = kStackTop - 0x800, b1 = b0 + 0x40;
    g.memory.put<uint64_t>(b0, b1);
    g.memory.put<uint64_t>(b0 + 8, kMid + 0x20);
    g.memory.put<uint64_t>(b1, b0);  // back down: a loop
    g.memory.put<uint64_t>(b1 + 8, kBottom + 0x30);
    UnwindStart start;
    start.regs.ip = kTop + 0x10;
    start.regs.sp = b0 - 0x10;
    start.regs.bp = b0;
    const Backtrace t = g.unwinder(OrcVersion::v1).unwind(start);
    EXPECT_TRUE(t.partial());
    EXPECT_NE(t.stopped.find("wrong way"), std::string::npos) << t.stopped;
    EXPECT_EQ(t.frames.size(), 3u);
}

TEST(HostileStack, ChainsAcrossStacksAndLongChainsAreBounded) {
    // Each frame pointer jumps to another 16 KiB block: bounded switches.
    Guest g({}, OrcVersion::v1);
    const uint64_t base = 0xffffc90001000000ULL;
    const size_t n = 40;
    for (size_t i = 0; i < n; ++i) g.memory.map(base + i * 0x4000, 0x4000);
    for (size_t i = 0; i < n; ++i) {
        const uint64_t bp = base + i * 0x4000 + 0x100;
        g.memory.put<uint64_t>(bp, i + 1 < n ? bp + 0x4000 : 0);
        g.memory.put<uint64_t>(bp + 8, kMid + 0x20);
    }
    UnwindStart start;
    start.regs.ip = kTop;
    start.regs.sp = base;
    start.regs.bp = base + 0x100;
    const auto u = g.unwinder(OrcVersion::v1);
    Backtrace t = u.unwind(start);
    EXPECT_TRUE(t.partial());
    EXPECT_NE(t.stopped.find("leaves the stack"), std::string::npos) << t.stopped;

    BacktraceLimits limits;
    limits.max_stack_switches = 1000;
    limits.max_frames = 16;
    t = u.unwind(start, limits);
    EXPECT_TRUE(t.partial());
    EXPECT_EQ(t.frames.size(), 16u);
    EXPECT_NE(t.stopped.find("more than 16 frames"), std::string::npos) << t.stopped;
}

TEST(HostileOrc, ImplausibleTablesAreNotUsedAndBadLookupsFallBackToTheWholeTable) {
    Guest g(syscall_orc(), OrcVersion::v1, true);
    // orc_lookup full of garbage: the whole table is searched instead.
    for (uint64_t b = 0; b < (kTextEnd - kText) / 256 + 1; ++b) g.memory.put<uint32_t>(kLookup + 4 * b, 0xfffffff0u);
    const UnwindStart start = build_syscall_stack(g);
    EXPECT_EQ(names(g.unwinder(OrcVersion::v1).unwind(start)), kSyscallFrames);

    // Tables whose sizes disagree are not ORC tables.
    auto symbols = g.symbols;
    for (auto& s : symbols)
        if (s.name == "__stop_orc_unwind") s.address += 6;
    EXPECT_FALSE(OrcTable::locate(SymbolTable(symbols), OrcVersion::v1));
    symbols = g.symbols;
    for (auto& s : symbols)
        if (s.name == "__stop_orc_unwind_ip") s.address = s.address - 4 * 6 + 4 * (OrcTable::kMaxEntries + 1);
    EXPECT_FALSE(OrcTable::locate(SymbolTable(symbols), OrcVersion::v1));
}

// The real guest kernel of the fixture (Debian 6.1, no KASLR): its ORC
// tables are found through its kallsyms, and at the first byte of every
// function they say what any function's entry is: the caller's frame is at
// sp + 8 and the return address just below it (a call-type entry).
TEST(OrcFixture, TheRealKernelsTablesDescribeFunctionEntries) {
    auto k = find_kallsyms(test::ram_reader(test::guest_ram()));
    ASSERT_TRUE(k);
    auto orc = OrcTable::locate(k->table, orc_version_for_release("6.1.0-57-amd64"));
    ASSERT_TRUE(orc);
    EXPECT_GT(orc->entries(), 100000u);
    PhysicalMemory physical(test::ram_reader(test::guest_ram()));
    KernelPaging paging;
    paging.phys_base = k->phys_base;
    KernelVirtualMemory memory(physical, paging);
    const VirtualReader read = [&memory](uint64_t va, std::span<std::byte> out) { return memory.read(va, out); };
    for (const char* name : {"vfs_write", "ksys_write", "panic", "do_idle", "schedule", "kmem_cache_alloc"}) {
        const auto at = k->table.address(name);
        ASSERT_TRUE(at) << name;
        const auto e = orc->find(*at, read);
        ASSERT_TRUE(e) << name;
        EXPECT_EQ(e->type, OrcType::call) << name;
        EXPECT_EQ(e->sp_reg, orc_reg::sp) << name;
        EXPECT_EQ(e->sp_offset, 8) << name;
    }
}

// xen-dumpctl backtrace on the real `xl dump-core` file of an idle PV
// guest (no VMCOREINFO: symbols from kallsyms, the release from the
// banner): its vcpu sits in a hypercall of the idle loop, and the frames
// below are those crash's bt shows for the lab's idle PV guest of the same
// kernel, ending at the ORC end marker of the boot stack.
TEST(BacktraceDump, TheXlFixturesIdleVcpuUnwindsThroughItsOrcTables) {
    test::TempDir dir;
    const std::filesystem::path xl = dir / "xl-pv.core";
    auto z = test::run({"zstd", "-q", "-d", "-o", xl.string(),
                        (test::shared_dir() / "fixtures" / "xl-dump-core-pv-6.1-128m.core.zst").string()});
    ASSERT_EQ(z.exit_code, 0) << z.err;
    auto r = test::run({"xen-dumpctl", "backtrace", "--json", xl.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("orc").get<bool>());
    EXPECT_EQ(j.at("panic_vcpu"), nullptr);
    ASSERT_EQ(j.at("vcpus").size(), 1u);
    const auto& v = j.at("vcpus")[0];
    EXPECT_EQ(v.at("method"), "orc");
    EXPECT_FALSE(v.at("partial").get<bool>()) << v.at("stopped");
    std::vector<std::string> functions;
    for (const auto& f : v.at("frames")) {
        EXPECT_TRUE(f.at("reliable").get<bool>());
        functions.push_back(f.at("symbol").get<std::string>());
    }
    EXPECT_EQ(functions, (std::vector<std::string>{
                             "xen_hypercall_pv+0x5", "xen_safe_halt+0x11", "default_idle+0xa",
                             "default_idle_call+0x38", "do_idle+0x206", "cpu_startup_entry+0x26", "rest_init+0xca",
                             "arch_call_rest_init+0xa", "start_kernel+0x6fb", "xen_start_kernel+0x640",
                             "startup_xen+0x1f"}));
    auto bt = test::run({"xen-dumpctl", "bt", xl.string()});
    ASSERT_EQ(bt.exit_code, 0) << bt.err;
    EXPECT_NE(bt.out.find("#10 [ffffffff82a03f50] startup_xen+0x1f at 0xffffffff830791df\n"), std::string::npos)
        << bt.out;
}

}  // namespace
}  // namespace xendump::kernel
