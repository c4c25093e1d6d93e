// The guest kernel's log (what dmesg shows), read from its printk buffer in
// guest memory as the kernel's own VMCOREINFO describes it:
//  - Linux >= 5.10: the lockless printk_ringbuffer (kernel/printk/
//    printk_ringbuffer.h): SYMBOL(prb) points at it; a descriptor ring
//    (count = 2^count_bits prb_desc + printk_info) and a text data ring
//    (2^size_bits bytes of blocks {unsigned long id; char text[]}); records
//    from tail_id to head_id, committed or finalized ones only;
//  - Linux 3.5 .. 5.9: variable-length struct printk_log records in log_buf
//    (log_buf_len bytes) from log_first_idx to log_next_idx, a record of
//    length 0 marking the wrap to the start.
// Every size and offset comes from VMCOREINFO (SIZE(), OFFSET()); the bytes
// come through a reader of kernel virtual addresses. The buffers are guest
// data: every position is bounds-checked, the walk is bounded by the ring's
// size, and what cannot be read is reported as damage (a partial log), never
// followed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xendump/kernel/vmcoreinfo.hpp"

namespace xendump::kernel {

// Reads out.size() bytes at kernel virtual address `vaddr`; false when they
// are not all there (KernelVirtualMemory::read fits).
using VirtualReader = std::function<bool(uint64_t vaddr, std::span<std::byte> out)>;

enum class PrintkFormat {
    ringbuffer,  // lockless printk_ringbuffer (Linux >= 5.10)
    log_buf,     // variable-length printk_log records (Linux 3.5 .. 5.9)
};

struct PrintkRecord {
    std::optional<uint64_t> sequence;  // printk_info.seq; log_buf records carry none
    uint64_t time_ns = 0;              // ts_nsec: local_clock() at printk time
    std::optional<uint8_t> level;      // 0 (emerg) .. 7 (debug)
    std::optional<uint8_t> facility;   // syslog facility (0 kernel)
    std::optional<uint32_t> caller_id; // bit 31 set: CPU number; else thread id
    std::string text;                  // the message bytes, unchanged (may hold '\n')
    std::string subsystem, device;     // dev_printk_info (ringbuffer only; "" if none)
    bool truncated = false;            // the data block was shorter than text_len
};

struct PrintkLog {
    PrintkFormat format = PrintkFormat::ringbuffer;
    uint64_t buffer_size = 0;          // the text ring / log_buf, bytes
    std::vector<PrintkRecord> records; // oldest first
    // Why the log is incomplete, one sentence each (damaged or missing parts
    // of the buffer, limits reached); empty when every record was read.
    std::vector<std::string> damage;
    bool partial() const { return !damage.empty(); }
};

struct PrintkLimits {
    size_t max_records = size_t{1} << 22;          // 4 Mi records
    uint64_t max_text_bytes = uint64_t{256} << 20; // 256 MiB of text in all
};

// Which format the VMCOREINFO describes; nullopt when it describes none
// (no SYMBOL(prb) nor SYMBOL(log_buf) with OFFSET(printk_log.*)).
std::optional<PrintkFormat> printk_format(const Vmcoreinfo& info);

// Reads the whole log. Throws Error when VMCOREINFO describes no buffer or
// misses a size/offset it needs, when the buffer's header is not in the dump,
// or when its geometry is impossible (sizes past the kernel's limits); damage
// inside the buffer gives a partial log instead.
PrintkLog read_printk_log(const Vmcoreinfo& info, const VirtualReader& read, const PrintkLimits& limits = {});

// Whether a record's text is the first line of a crash report: panic()'s
// "Kernel panic - not syncing: ...", an Oops ("Oops: 0002 [#1] ..."), a BUG
// ("BUG: ...", "kernel BUG at FILE:LINE!", the soft-lockup watchdog's
// "watchdog: BUG: ..."), or a fault that ends in one ("general protection
// fault...", "Unable to handle kernel ...", "double fault: ...").
bool is_crash_report(std::string_view text);

// The log's crash-report records (is_crash_report), oldest first.
std::vector<const PrintkRecord*> crash_records(const PrintkLog& log);

// One record as `makedumpfile --dump-dmesg` prints it: "[%5llu.%06llu] "
// (seconds, microseconds), the text with each '\n' followed by the prefix's
// width of spaces, and a final newline; each line of the text under the one
// rule for guest text (escape_text, xendump/text.hpp). That rule differs from
// makedumpfile's (bytes neither printable nor space as "\xNN") where a guest
// could redraw the terminal or pass for an escape: '\r', '\v' and '\f' are
// escaped, a backslash is doubled, and valid UTF-8 other than the bidi and
// separator controls is kept.
std::string format_dmesg_record(const PrintkRecord& record);

// The whole log as `makedumpfile --dump-dmesg` writes it (every record,
// format_dmesg_record), as `xen-dumpctl dmesg` prints it and xen-dumpd saves
// it beside a dump.
std::string format_dmesg(const PrintkLog& log);

// The first line of format_dmesg_record(record), without its newline:
// "[    1.978455] Kernel panic - not syncing: ...".
std::string dmesg_first_line(const PrintkRecord& record);

// The first line (dmesg_first_line) of the log's first crash report
// (crash_records): the panic line of a crashed guest; nullopt when none.
std::optional<std::string> first_crash_line(const PrintkLog& log);

// "T<pid>" for a task, "C<cpu>" for a CPU (the kernel's PRINTK_CALLER form).
std::string caller_string(uint32_t caller_id);

}  // namespace xendump::kernel
