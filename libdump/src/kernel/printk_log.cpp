// The guest kernel's printk buffer, both formats (see printk_log.hpp).
// Ring-buffer facts: Linux kernel/printk/printk_ringbuffer.{h,c} (v5.10+):
// a descriptor's state_var holds its id in bits 0..61 and its state in bits
// 62..63 (0 reserved, 1 committed, 2 finalized, 3 reusable); a text block's
// logical positions begin/next index the data ring modulo its size, a block
// that would straddle the end is stored at the ring's start (begin > next
// after the modulo); the block starts with the descriptor id (an unsigned
// long) and the text follows. printk_info and printk_log: u16 text_len (and
// printk_log's u16 dict_len) are followed by u8 facility and a byte whose top
// three bits are the level, then (ringbuffer; printk_log with
// CONFIG_PRINTK_CALLER) u32 caller_id.
#include "xendump/kernel/printk_log.hpp"
#include "xendump/text.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::kernel {
namespace {

constexpr uint64_t kIdMask = ~(3ULL << 62);
constexpr unsigned kStateShift = 62;
constexpr uint64_t kStateCommitted = 1, kStateFinalized = 2;
constexpr uint64_t kBlockIdSize = 8;  // sizeof(unsigned long) on x86_64
// The kernel's limits: log_buf_len is at most 2^31 (LOG_BUF_LEN_MAX), and
// there is one descriptor per 32 bytes of text on average (PRB_AVGBITS 5).
constexpr unsigned kMaxSizeBits = 31;
constexpr unsigned kMaxCountBits = 31 - 5;
constexpr uint64_t kMaxStructSize = 4096;

using util::hex;

// VMCOREINFO lookups that name the missing line in their error.
class Fields {
public:
    explicit Fields(const Vmcoreinfo& info) : info_(info) {}

    std::optional<uint64_t> find(std::string_view kind, std::string_view name) const {
        auto v = info_.value(std::string(kind) + "(" + std::string(name) + ")");
        if (!v) return std::nullopt;
        uint64_t out = 0;
        auto r = std::from_chars(v->data(), v->data() + v->size(), out, 10);
        if (r.ec != std::errc() || r.ptr != v->data() + v->size()) return std::nullopt;
        return out;
    }
    // A line that is absent or not a non-negative decimal.
    uint64_t need(std::string_view kind, std::string_view name) const {
        auto v = find(kind, name);
        if (!v) missing(std::string(kind) + "(" + std::string(name) + ")");
        return *v;
    }
    uint64_t size(std::string_view name) const {
        const uint64_t s = need("SIZE", name);
        if (s == 0 || s > kMaxStructSize)
            throw Error("VMCOREINFO gives SIZE(" + std::string(name) + ")=" + std::to_string(s) +
                        ", not a plausible structure size");
        return s;
    }
    uint64_t offset(std::string_view name) const { return need("OFFSET", name); }
    uint64_t symbol(std::string_view name) const {
        auto s = info_.symbol(name);
        if (!s) missing("SYMBOL(" + std::string(name) + ")");
        return *s;
    }
    [[noreturn]] static void missing(const std::string& key) {
        throw Error("VMCOREINFO has no " + key + ": cannot read the kernel log");
    }

private:
    const Vmcoreinfo& info_;
};

// A structure copied out of guest memory; every field read is checked
// against its size (the offsets are guest data too).
class Blob {
public:
    Blob(std::string name, uint64_t size) : name_(std::move(name)), bytes_(size) {}
    std::span<std::byte> bytes() { return bytes_; }
    uint64_t get(uint64_t offset, size_t width) const {
        if (offset > bytes_.size() || bytes_.size() - offset < width)
            throw Error("VMCOREINFO puts a field of " + name_ + " at offset " + std::to_string(offset) +
                        ", past its size " + std::to_string(bytes_.size()));
        uint64_t v = 0;
        std::memcpy(&v, bytes_.data() + offset, width);  // little-endian guest
        return v;
    }
    uint64_t u64(uint64_t offset) const { return get(offset, 8); }
    uint32_t u32(uint64_t offset) const { return static_cast<uint32_t>(get(offset, 4)); }
    uint16_t u16(uint64_t offset) const { return static_cast<uint16_t>(get(offset, 2)); }
    uint8_t u8(uint64_t offset) const { return static_cast<uint8_t>(get(offset, 1)); }
    // A NUL-terminated string in a char[length] field.
    std::string c_string(uint64_t offset, uint64_t length) const {
        if (offset > bytes_.size() || bytes_.size() - offset < length) return {};
        const char* p = reinterpret_cast<const char*>(bytes_.data() + offset);
        return std::string(p, strnlen(p, length));
    }

private:
    std::string name_;
    std::vector<std::byte> bytes_;
};

uint64_t read_word(const VirtualReader& read, uint64_t vaddr, size_t width, const std::string& what) {
    uint64_t v = 0;
    if (!read(vaddr, std::as_writable_bytes(std::span(&v, 1)).first(width)))
        throw Error(what + " at " + hex(vaddr) + " is not in the dump");
    return v;
}

// The facility byte and the flags:5/level:3 byte that follow the u16 at
// `after` (callers check that the layout has room for them there).
void set_level_facility(PrintkRecord& r, const Blob& b, uint64_t after) {
    r.facility = b.u8(after + 2);
    r.level = static_cast<uint8_t>(b.u8(after + 3) >> 5);
}

// Damage counted over the whole walk and reported as one sentence per kind.
struct DamageCounts {
    uint64_t missing_descriptor = 0, missing_info = 0, missing_text = 0, bad_block = 0, truncated = 0;

    uint64_t overlapping = 0;

    void report(std::vector<std::string>& out) const {
        auto add = [&out](uint64_t n, const char* what) {
            if (n) out.push_back(std::to_string(n) + (n == 1 ? " record: " : " records: ") + what);
        };
        add(missing_descriptor, "descriptor not in the dump (left out)");
        add(missing_info, "printk_info not in the dump (left out)");
        add(missing_text, "text not in the dump (left out)");
        add(bad_block, "text block shorter than its id (left out)");
        add(truncated, "text longer than its data block (cut at the block's end)");
        add(overlapping, "text block overlaps an earlier record's (left out)");
    }
};

// The data ring's bytes that records' blocks hold, a bit per 8 bytes: in a
// kernel's ring no two live records share bytes, so a log read through it
// holds at most the ring's size of text, however many descriptors point at
// one block (what a guest could do to make the reader's memory its to choose).
class RingClaims {
public:
    explicit RingClaims(uint64_t ring_size) : bits_((ring_size / kBlockIdSize + 63) / 64, 0) {}

    // Claims [begin, next) (next <= the ring's size); false, claiming
    // nothing, when an earlier block holds any of it.
    bool claim(uint64_t begin, uint64_t next) {
        const uint64_t first = begin / kBlockIdSize, end = (next + kBlockIdSize - 1) / kBlockIdSize;
        for (uint64_t g = first; g < end; ++g)
            if (bits_[g / 64] >> (g % 64) & 1) return false;
        for (uint64_t g = first; g < end; ++g) bits_[g / 64] |= uint64_t{1} << (g % 64);
        return true;
    }

private:
    std::vector<uint64_t> bits_;
};

// Adds `r` unless the text budget is spent; false when it is.
bool keep(PrintkLog& log, PrintkRecord&& r, uint64_t& text_total, const PrintkLimits& limits) {
    if (r.text.size() > limits.max_text_bytes - std::min(text_total, limits.max_text_bytes)) {
        log.damage.push_back("the text of the records exceeds " + std::to_string(limits.max_text_bytes) +
                             " bytes: the newer records are left out");
        return false;
    }
    text_total += r.text.size();
    log.records.push_back(std::move(r));
    return true;
}

PrintkLog read_ringbuffer(const Fields& f, const VirtualReader& read, const PrintkLimits& limits) {
    // Layout, all from VMCOREINFO.
    const uint64_t desc_ring = f.offset("printk_ringbuffer.desc_ring");
    const uint64_t text_ring = f.offset("printk_ringbuffer.text_data_ring");
    const uint64_t count_bits_at = desc_ring + f.offset("prb_desc_ring.count_bits");
    const uint64_t descs_at = desc_ring + f.offset("prb_desc_ring.descs");
    const uint64_t infos_at = desc_ring + f.offset("prb_desc_ring.infos");
    const uint64_t counter = f.find("OFFSET", "atomic_long_t.counter").value_or(0);
    const uint64_t head_at = desc_ring + f.offset("prb_desc_ring.head_id") + counter;
    const uint64_t tail_at = desc_ring + f.offset("prb_desc_ring.tail_id") + counter;
    const uint64_t size_bits_at = text_ring + f.offset("prb_data_ring.size_bits");
    const uint64_t data_at = text_ring + f.offset("prb_data_ring.data");
    const uint64_t desc_size = f.size("prb_desc");
    const uint64_t state_at = f.offset("prb_desc.state_var") + counter;
    const uint64_t lpos = f.offset("prb_desc.text_blk_lpos");
    const uint64_t begin_at = lpos + f.offset("prb_data_blk_lpos.begin");
    const uint64_t next_at = lpos + f.offset("prb_data_blk_lpos.next");
    const uint64_t info_size = f.size("printk_info");
    const uint64_t seq_at = f.offset("printk_info.seq");
    const uint64_t ts_at = f.offset("printk_info.ts_nsec");
    const uint64_t text_len_at = f.offset("printk_info.text_len");
    const auto caller_at = f.find("OFFSET", "printk_info.caller_id");
    const auto dev_info = f.find("OFFSET", "printk_info.dev_info");
    const auto subsystem = f.find("OFFSET", "dev_printk_info.subsystem");
    const auto device = f.find("OFFSET", "dev_printk_info.device");
    const uint64_t subsystem_len = f.find("LENGTH", "printk_info_subsystem").value_or(0);
    const uint64_t device_len = f.find("LENGTH", "printk_info_device").value_or(0);

    Blob prb("printk_ringbuffer", f.size("printk_ringbuffer"));
    const uint64_t prb_addr = read_word(read, f.symbol("prb"), 8, "the pointer prb");
    if (!read(prb_addr, prb.bytes()))
        throw Error("the printk_ringbuffer at " + hex(prb_addr) + " (prb) is not in the dump");
    const uint32_t count_bits = prb.u32(count_bits_at), size_bits = prb.u32(size_bits_at);
    if (count_bits > kMaxCountBits || size_bits > kMaxSizeBits || size_bits < 4)
        throw Error("the printk_ringbuffer at " + hex(prb_addr) + " has count_bits " + std::to_string(count_bits) +
                    " and size_bits " + std::to_string(size_bits) + ", beyond the kernel's limits");
    const uint64_t count = 1ULL << count_bits, size = 1ULL << size_bits;
    const uint64_t descs = prb.u64(descs_at), infos = prb.u64(infos_at), data = prb.u64(data_at);
    const uint64_t head = prb.u64(head_at) & kIdMask;
    uint64_t tail = prb.u64(tail_at) & kIdMask;

    PrintkLog log;
    log.format = PrintkFormat::ringbuffer;
    log.buffer_size = size;
    // From tail to head inclusive: never more ids than the ring has slots
    // (a damaged tail could otherwise ask for 2^62 of them).
    uint64_t span = ((head - tail) & kIdMask) + 1;
    if (span > count) {
        log.damage.push_back("tail_id " + hex(tail) + " and head_id " + hex(head) +
                             " are further apart than the ring's " + std::to_string(count) +
                             " descriptors: only the newest " + std::to_string(count) + " are read");
        span = count;
    }
    if (span > limits.max_records) {
        log.damage.push_back("more than " + std::to_string(limits.max_records) +
                             " records: only the newest are read");
        span = limits.max_records;
    }
    tail = (head - (span - 1)) & kIdMask;

    DamageCounts damage;
    RingClaims claims(size);
    uint64_t text_total = 0;
    Blob desc("prb_desc", desc_size), info("printk_info", info_size);
    for (uint64_t i = 0, id = tail; i < span; ++i, id = (id + 1) & kIdMask) {
        const uint64_t slot = id & (count - 1);
        if (!read(descs + slot * desc_size, desc.bytes())) {
            ++damage.missing_descriptor;
            continue;
        }
        const uint64_t state_var = desc.u64(state_at);
        const uint64_t state = state_var >> kStateShift;
        // Reserved (being written), reusable, or a slot already reused by a newer id.
        if ((state_var & kIdMask) != id || (state != kStateCommitted && state != kStateFinalized)) continue;
        uint64_t begin = desc.u64(begin_at) % size;
        const uint64_t next = desc.u64(next_at) % size;
        if (begin == next) continue;  // a data-less record (no text, or its text was lost)
        if (begin > next) begin = 0;  // wrapped: the block was stored at the ring's start
        if (next - begin < kBlockIdSize) {
            ++damage.bad_block;
            continue;
        }
        if (!claims.claim(begin, next)) {
            ++damage.overlapping;
            continue;
        }
        if (!read(infos + slot * info_size, info.bytes())) {
            ++damage.missing_info;
            continue;
        }
        PrintkRecord r;
        r.sequence = info.u64(seq_at);
        r.time_ns = info.u64(ts_at);
        const uint64_t available = next - begin - kBlockIdSize;
        const uint64_t text_len = info.u16(text_len_at);
        r.truncated = text_len > available;
        if (r.truncated) ++damage.truncated;
        r.text.resize(static_cast<size_t>(std::min(text_len, available)));
        if (!read(data + begin + kBlockIdSize, std::as_writable_bytes(std::span(r.text)))) {
            ++damage.missing_text;
            continue;
        }
        if (caller_at) {
            r.caller_id = info.u32(*caller_at);
            if (*caller_at == text_len_at + 4) set_level_facility(r, info, text_len_at);
        }
        if (dev_info && subsystem && subsystem_len)
            r.subsystem = info.c_string(*dev_info + *subsystem, subsystem_len);
        if (dev_info && device && device_len) r.device = info.c_string(*dev_info + *device, device_len);
        if (!keep(log, std::move(r), text_total, limits)) break;
    }
    damage.report(log.damage);
    return log;
}

PrintkLog read_log_buf(const Fields& f, const VirtualReader& read, const PrintkLimits& limits) {
    const uint64_t header_size = f.size("printk_log");
    const uint64_t ts_at = f.offset("printk_log.ts_nsec");
    const uint64_t len_at = f.offset("printk_log.len");
    const uint64_t text_len_at = f.offset("printk_log.text_len");
    const auto dict_len_at = f.find("OFFSET", "printk_log.dict_len");

    const uint64_t buf = read_word(read, f.symbol("log_buf"), 8, "the pointer log_buf");
    const uint64_t buf_len = read_word(read, f.symbol("log_buf_len"), 4, "log_buf_len");
    const uint64_t first = read_word(read, f.symbol("log_first_idx"), 4, "log_first_idx");
    const uint64_t next = read_word(read, f.symbol("log_next_idx"), 4, "log_next_idx");
    if (buf_len < header_size || buf_len > (1ULL << kMaxSizeBits) || first >= buf_len || next >= buf_len)
        throw Error("log_buf at " + hex(buf) + " has length " + std::to_string(buf_len) + ", log_first_idx " +
                    std::to_string(first) + " and log_next_idx " + std::to_string(next) +
                    ": not a plausible log buffer");

    PrintkLog log;
    log.format = PrintkFormat::log_buf;
    log.buffer_size = buf_len;
    uint64_t text_total = 0, truncated = 0;
    bool wrapped = false;
    Blob header("printk_log", header_size);
    // Each step either advances by at least one header or wraps (once).
    const uint64_t max_steps = buf_len / header_size + 2;
    uint64_t idx = first, steps = 0;
    while (idx != next) {
        if (++steps > max_steps) {
            log.damage.push_back("log_buf's records do not reach log_next_idx within the buffer (a loop): "
                                 "stopped after " + std::to_string(log.records.size()));
            break;
        }
        if (log.records.size() >= limits.max_records) {
            log.damage.push_back("more than " + std::to_string(limits.max_records) +
                                 " records: the newer ones are left out");
            break;
        }
        const std::string where = "the record at index " + std::to_string(idx) + " of log_buf";
        if (idx > buf_len - header_size) {
            log.damage.push_back(where + " starts too close to the end for its header: the rest is lost");
            break;
        }
        if (!read(buf + idx, header.bytes())) {
            log.damage.push_back(where + " is not in the dump: the rest is lost");
            break;
        }
        const uint64_t len = header.u16(len_at);
        if (len == 0) {  // the wrap marker: the next record is at the start
            if (wrapped) {
                log.damage.push_back(where + " is a second wrap marker: the rest is lost");
                break;
            }
            wrapped = true;
            idx = 0;
            continue;
        }
        if (len < header_size || len > buf_len - idx) {
            log.damage.push_back(where + " has length " + std::to_string(len) +
                                 ", outside the buffer: the rest is lost");
            break;
        }
        PrintkRecord r;
        r.time_ns = header.u64(ts_at);
        const uint64_t text_len = header.u16(text_len_at);
        r.truncated = text_len > len - header_size;
        if (r.truncated) ++truncated;
        r.text.resize(static_cast<size_t>(std::min(text_len, len - header_size)));
        if (!read(buf + idx + header_size, std::as_writable_bytes(std::span(r.text)))) {
            log.damage.push_back("the text of " + where + " is not in the dump: the rest is lost");
            break;
        }
        if (dict_len_at && header_size >= *dict_len_at + 4) set_level_facility(r, header, *dict_len_at);
        if (dict_len_at && header_size >= *dict_len_at + 8) r.caller_id = header.u32(*dict_len_at + 4);
        if (!keep(log, std::move(r), text_total, limits)) break;
        idx += len;
    }
    if (truncated)
        log.damage.push_back(std::to_string(truncated) + " records: text longer than the record (cut at its end)");
    return log;
}

}  // namespace

std::optional<PrintkFormat> printk_format(const Vmcoreinfo& info) {
    if (info.symbol("prb")) return PrintkFormat::ringbuffer;
    if (info.symbol("log_buf") && info.value("SIZE(printk_log)")) return PrintkFormat::log_buf;
    return std::nullopt;
}

PrintkLog read_printk_log(const Vmcoreinfo& info, const VirtualReader& read, const PrintkLimits& limits) {
    const Fields f(info);
    if (auto format = printk_format(info))
        return *format == PrintkFormat::ringbuffer ? read_ringbuffer(f, read, limits) : read_log_buf(f, read, limits);
    if (info.symbol("log_buf"))
        throw Error("VMCOREINFO describes a log_buf without SIZE(printk_log): a kernel before 3.5, whose "
                    "plain character buffer is not read");
    throw Error("VMCOREINFO has neither SYMBOL(prb) nor SYMBOL(log_buf): it describes no kernel log");
}

bool is_crash_report(std::string_view text) {
    // Linux kernel/panic.c, arch/x86/kernel/dumpstack.c (__die_header),
    // lib/bug.c, arch/x86/mm/fault.c, arch/x86/kernel/traps.c,
    // kernel/watchdog.c; arch/arm64/mm/fault.c for "Unable to handle".
    static constexpr std::string_view kStarts[] = {
        "Kernel panic - not syncing", "Oops: ", "BUG: ", "kernel BUG at ", "watchdog: BUG: ",
        "general protection fault", "Unable to handle kernel ", "double fault: ",
    };
    return std::any_of(std::begin(kStarts), std::end(kStarts),
                       [text](std::string_view s) { return text.starts_with(s); });
}

std::vector<const PrintkRecord*> crash_records(const PrintkLog& log) {
    std::vector<const PrintkRecord*> out;
    for (const auto& r : log.records)
        if (is_crash_report(r.text)) out.push_back(&r);
    return out;
}

std::string caller_string(uint32_t caller_id) {
    constexpr uint32_t kCpuFlag = 0x80000000u;
    return (caller_id & kCpuFlag ? "C" : "T") + std::to_string(caller_id & ~kCpuFlag);
}

std::string format_dmesg_record(const PrintkRecord& record) {
    char prefix[48];
    const int width = std::snprintf(prefix, sizeof prefix, "[%5llu.%06llu] ",
                                    static_cast<unsigned long long>(record.time_ns / 1000000000ULL),
                                    static_cast<unsigned long long>(record.time_ns % 1000000000ULL / 1000));
    std::string out(prefix, static_cast<size_t>(width));
    out.reserve(out.size() + record.text.size() + 1);
    // Each line of the text under the one escaping rule for guest text
    // (xendump/text.hpp): a '\r', '\v', ESC or bidi control of the guest's
    // cannot redraw what the terminal shows.
    std::string_view text = record.text;
    for (size_t nl; (nl = text.find('\n')) != std::string_view::npos; text.remove_prefix(nl + 1)) {
        out += escape_text(text.substr(0, nl));
        out += '\n';
        out.append(static_cast<size_t>(width), ' ');
    }
    out += escape_text(text);
    out += '\n';
    return out;
}

std::string format_dmesg(const PrintkLog& log) {
    std::string out;
    for (const auto& r : log.records) out += format_dmesg_record(r);
    return out;
}

std::string dmesg_first_line(const PrintkRecord& record) {
    std::string text = format_dmesg_record(record);
    text.resize(text.find('\n'));
    return text;
}

std::optional<std::string> first_crash_line(const PrintkLog& log) {
    const auto reports = crash_records(log);
    if (reports.empty()) return std::nullopt;
    return dmesg_first_line(*reports.front());
}

}  // namespace xendump::kernel
