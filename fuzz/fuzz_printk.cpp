// libFuzzer target: the printk buffer reader (kernel/printk_log.hpp) over a
// guest whose kernel virtual memory is the input: byte 0 chooses the format
// (even: the lockless printk_ringbuffer, odd: log_buf records) and the rest
// is mapped at virtual address 0, where VMCOREINFO puts the pointer prb (or
// log_buf, log_buf_len at 8, log_first_idx at 16, log_next_idx at 24); every
// other address the buffer names is read from the input or is missing.
// Errors and partial logs are the expected outcomes; crashes, hangs, leaks,
// UB and unbounded memory are the bugs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "xendump/error.hpp"
#include "xendump/kernel/printk_log.hpp"

namespace {

const char kCommon[] = "OSRELEASE=6.1.0-fuzz\nPAGESIZE=4096\nSYMBOL(swapper_pg_dir)=ffffffff82a10000\n";

// The layout of Linux 6.1 (x86_64), as its VMCOREINFO gives it.
const char kRing[] =
    "SYMBOL(prb)=0\nSIZE(printk_ringbuffer)=88\nOFFSET(printk_ringbuffer.desc_ring)=0\n"
    "OFFSET(printk_ringbuffer.text_data_ring)=48\nOFFSET(prb_desc_ring.count_bits)=0\n"
    "OFFSET(prb_desc_ring.descs)=8\nOFFSET(prb_desc_ring.infos)=16\nOFFSET(prb_desc_ring.head_id)=24\n"
    "OFFSET(prb_desc_ring.tail_id)=32\nSIZE(prb_desc)=24\nOFFSET(prb_desc.state_var)=0\n"
    "OFFSET(prb_desc.text_blk_lpos)=8\nOFFSET(prb_data_blk_lpos.begin)=0\nOFFSET(prb_data_blk_lpos.next)=8\n"
    "SIZE(printk_info)=88\nOFFSET(printk_info.seq)=0\nOFFSET(printk_info.ts_nsec)=8\n"
    "OFFSET(printk_info.text_len)=16\nOFFSET(printk_info.caller_id)=20\nOFFSET(printk_info.dev_info)=24\n"
    "OFFSET(dev_printk_info.subsystem)=0\nLENGTH(printk_info_subsystem)=16\nOFFSET(dev_printk_info.device)=16\n"
    "LENGTH(printk_info_device)=48\nOFFSET(prb_data_ring.size_bits)=0\nOFFSET(prb_data_ring.data)=8\n"
    "OFFSET(atomic_long_t.counter)=0\n";

// Linux 5.4 with CONFIG_PRINTK_CALLER.
const char kLogBuf[] =
    "SYMBOL(log_buf)=0\nSYMBOL(log_buf_len)=8\nSYMBOL(log_first_idx)=10\nSYMBOL(log_next_idx)=18\n"
    "SIZE(printk_log)=20\nOFFSET(printk_log.ts_nsec)=0\nOFFSET(printk_log.len)=8\n"
    "OFFSET(printk_log.text_len)=10\nOFFSET(printk_log.dict_len)=12\n";

const xendump::kernel::Vmcoreinfo& layout(bool log_buf) {
    static const auto ring = xendump::kernel::Vmcoreinfo::parse(std::string(kCommon) + kRing);
    static const auto old = xendump::kernel::Vmcoreinfo::parse(std::string(kCommon) + kLogBuf);
    return log_buf ? *old : *ring;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const bool log_buf = data[0] & 1;
    const std::span<const uint8_t> memory(data + 1, size - 1);
    auto read = [memory](uint64_t vaddr, std::span<std::byte> out) {
        if (vaddr > memory.size() || memory.size() - vaddr < out.size()) return false;
        std::memcpy(out.data(), memory.data() + vaddr, out.size());
        return true;
    };
    try {
        // Limits well under the fuzzer's memory budget.
        const auto log = xendump::kernel::read_printk_log(layout(log_buf), read,
                                                          {.max_records = 1 << 16, .max_text_bytes = 1 << 24});
        for (const auto& r : log.records) (void)xendump::kernel::format_dmesg_record(r);
    } catch (const xendump::Error&) {
    }
    return 0;
}
