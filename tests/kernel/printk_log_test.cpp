// Issue 20 item 1: the guest kernel's log from its printk buffer.
//  - the parser on hand-built buffers of both formats (lockless
//    printk_ringbuffer, variable-length log_buf records), hostile ones
//    included: they end with an Error or a partial log, never a hang;
//  - the page-table walk that turns the kernel's virtual addresses into
//    guest-physical ones (4 and 5 levels, large pages, PV machine frames);
//  - the real guest RAM fixture (Debian 6.1): its log read from the RAM, and
//    `xen-dumpctl dmesg` on its dump as an HVM guest of the simulated host,
//    line for line equal to `makedumpfile --dump-dmesg` on the same file.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "dump_support.hpp"
#include "guest_ram.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/kernel/printk_log.hpp"
#include "fake_kernel_memory.hpp"
#include "xendump/kernel/virtual_memory.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

using kernel::PrintkLog;
using kernel::PrintkRecord;
using nlohmann::json;
namespace fs = std::filesystem;

kernel::Vmcoreinfo parse(const std::string& text) {
    auto info = kernel::Vmcoreinfo::parse(text);
    if (!info) throw std::runtime_error("test vmcoreinfo does not parse:\n" + text);
    return *info;
}

constexpr uint64_t kIdMask = ~(3ULL << 62);
constexpr uint64_t kCommitted = 1ULL << 62, kFinalized = 2ULL << 62, kReusable = 3ULL << 62;

// A printk_ringbuffer laid out as Linux 6.1 lays it out (the offsets of the
// fixture kernel's VMCOREINFO), filled the way prb_reserve() fills it.
class Ring {
public:
    static constexpr uint64_t kPrbPointer = 0xffffffff82a643e0, kPrb = 0xffffffff82a64400;
    static constexpr uint64_t kDescs = 0xff11000001000000, kInfos = 0xff11000002000000,
                              kData = 0xff11000003000000;
    static constexpr uint64_t kDescSize = 24, kInfoSize = 88;

    Ring(unsigned count_bits, unsigned size_bits, uint64_t first_id = 0, uint64_t first_lpos = 0)
        : count_(1ULL << count_bits), size_(1ULL << size_bits), next_id_(first_id & kIdMask), lpos_(first_lpos) {
        mem.map(kPrbPointer, 8);
        mem.put(kPrbPointer, kPrb);
        mem.map(kPrb, 88);
        mem.put<uint32_t>(kPrb + 0, count_bits);
        mem.put(kPrb + 8, kDescs);
        mem.put(kPrb + 16, kInfos);
        mem.put<uint32_t>(kPrb + 48, size_bits);
        mem.put(kPrb + 56, kData);
        mem.map(kDescs, count_ * kDescSize);
        mem.map(kInfos, count_ * kInfoSize);
        mem.map(kData, size_);
        set_head(next_id_);
        set_tail(next_id_);
    }

    // Appends a finalized record; returns its id.
    uint64_t add(std::string_view text, uint64_t ts_nsec, uint8_t level = 6, uint32_t caller = 1,
                 std::string_view subsystem = {}, std::string_view device = {}) {
        const uint64_t id = next_id_;
        next_id_ = (next_id_ + 1) & kIdMask;
        const uint64_t block = (8 + text.size() + 7) & ~uint64_t{7};
        uint64_t begin = lpos_, next = lpos_ + block;
        if (begin / size_ != next / size_) next = (next / size_) * size_ + block;  // stored at the start
        lpos_ = next;
        const uint64_t at = (next - block) % size_;
        mem.put(kData + at, id);
        mem.put_bytes(kData + at + 8, text);
        const uint64_t slot = id % count_;
        const uint64_t d = kDescs + slot * kDescSize, i = kInfos + slot * kInfoSize;
        mem.put(d, kFinalized | id);
        mem.put(d + 8, begin);
        mem.put(d + 16, next);
        mem.put<uint64_t>(i + 0, seq_++);
        mem.put<uint64_t>(i + 8, ts_nsec);
        mem.put<uint16_t>(i + 16, static_cast<uint16_t>(text.size()));
        mem.put<uint8_t>(i + 18, 0);                                    // facility
        mem.put<uint8_t>(i + 19, static_cast<uint8_t>(level << 5));     // flags:5, level:3
        mem.put<uint32_t>(i + 20, caller);
        mem.put_bytes(i + 24, subsystem);
        mem.put_bytes(i + 24 + 16, device);
        set_head(id);
        return id;
    }

    void set_head(uint64_t id) { mem.put(kPrb + 24, id); }
    void set_tail(uint64_t id) { mem.put(kPrb + 32, id); }
    uint64_t desc(uint64_t id) const { return kDescs + (id % count_) * kDescSize; }
    uint64_t info(uint64_t id) const { return kInfos + (id % count_) * kInfoSize; }

    static std::string vmcoreinfo() {
        return "OSRELEASE=6.1.0-test\nPAGESIZE=4096\nSYMBOL(swapper_pg_dir)=ffffffff82a10000\n"
               "SYMBOL(prb)=ffffffff82a643e0\nSIZE(printk_ringbuffer)=88\n"
               "OFFSET(printk_ringbuffer.desc_ring)=0\nOFFSET(printk_ringbuffer.text_data_ring)=48\n"
               "OFFSET(printk_ringbuffer.fail)=80\nSIZE(prb_desc_ring)=48\nOFFSET(prb_desc_ring.count_bits)=0\n"
               "OFFSET(prb_desc_ring.descs)=8\nOFFSET(prb_desc_ring.infos)=16\nOFFSET(prb_desc_ring.head_id)=24\n"
               "OFFSET(prb_desc_ring.tail_id)=32\nSIZE(prb_desc)=24\nOFFSET(prb_desc.state_var)=0\n"
               "OFFSET(prb_desc.text_blk_lpos)=8\nSIZE(prb_data_blk_lpos)=16\nOFFSET(prb_data_blk_lpos.begin)=0\n"
               "OFFSET(prb_data_blk_lpos.next)=8\nSIZE(printk_info)=88\nOFFSET(printk_info.seq)=0\n"
               "OFFSET(printk_info.ts_nsec)=8\nOFFSET(printk_info.text_len)=16\nOFFSET(printk_info.caller_id)=20\n"
               "OFFSET(printk_info.dev_info)=24\nSIZE(dev_printk_info)=64\nOFFSET(dev_printk_info.subsystem)=0\n"
               "LENGTH(printk_info_subsystem)=16\nOFFSET(dev_printk_info.device)=16\nLENGTH(printk_info_device)=48\n"
               "SIZE(prb_data_ring)=32\nOFFSET(prb_data_ring.size_bits)=0\nOFFSET(prb_data_ring.data)=8\n"
               "OFFSET(prb_data_ring.head_lpos)=16\nOFFSET(prb_data_ring.tail_lpos)=24\nSIZE(atomic_long_t)=8\n"
               "OFFSET(atomic_long_t.counter)=0\n";
    }

    PrintkLog read(const kernel::PrintkLimits& limits = {}) const {
        return kernel::read_printk_log(parse(vmcoreinfo()), mem.reader(), limits);
    }

    FakeKernelMemory mem;

private:
    uint64_t count_, size_, next_id_, lpos_, seq_ = 0;
};

std::vector<std::string> texts(const PrintkLog& log) {
    std::vector<std::string> out;
    for (const auto& r : log.records) out.push_back(r.text);
    return out;
}

std::string joined(const std::vector<std::string>& damage) {
    std::string s;
    for (const auto& d : damage) s += d + "\n";
    return s;
}

TEST(PrintkRingbuffer, ReadsEveryFieldOfEachRecordInOrder) {
    Ring ring(4, 10);
    ring.add("Linux version 6.1.0-test", 0, 5, 0);
    ring.add("usb 1-1: new device", 1'234'567'891, 6, 0x80000001u, "usb", "+usb:1-1");
    ring.add("Kernel panic - not syncing: sysrq triggered crash", 98'765'000'000'123, 0, 42);
    const PrintkLog log = ring.read();
    EXPECT_FALSE(log.partial()) << joined(log.damage);
    EXPECT_EQ(log.format, kernel::PrintkFormat::ringbuffer);
    EXPECT_EQ(log.buffer_size, 1024u);
    ASSERT_EQ(log.records.size(), 3u);
    const PrintkRecord& usb = log.records[1];
    EXPECT_EQ(usb.sequence, 1u);
    EXPECT_EQ(usb.time_ns, 1'234'567'891u);
    EXPECT_EQ(usb.level, 6);
    EXPECT_EQ(usb.facility, 0);
    EXPECT_EQ(usb.caller_id, 0x80000001u);
    EXPECT_EQ(kernel::caller_string(*usb.caller_id), "C1");
    EXPECT_EQ(kernel::caller_string(*log.records[2].caller_id), "T42");
    EXPECT_EQ(usb.subsystem, "usb");
    EXPECT_EQ(usb.device, "+usb:1-1");
    EXPECT_EQ(usb.text, "usb 1-1: new device");
    EXPECT_EQ(log.records[0].level, 5);
    EXPECT_EQ(log.records[2].level, 0);
    EXPECT_EQ(kernel::format_dmesg_record(log.records[0]), "[    0.000000] Linux version 6.1.0-test\n");
    EXPECT_EQ(kernel::format_dmesg_record(usb), "[    1.234567] usb 1-1: new device\n");
    EXPECT_EQ(kernel::format_dmesg_record(log.records[2]),
              "[98765.000000] Kernel panic - not syncing: sysrq triggered crash\n");
}

TEST(PrintkRingbuffer, FollowsBlocksStoredAtTheStartAndIdsPastTheirMask) {
    // Ids cross the 62-bit id space's end; the text positions cross the end
    // of the 256-byte ring (a block that does not fit is stored at its start).
    Ring ring(3, 8, kIdMask - 2, 3 * 256 + 160);
    std::vector<std::string> want;
    for (int i = 0; i < 6; ++i) {
        want.push_back("message number " + std::to_string(i));
        ring.add(want.back(), 1000u * i);
    }
    // The ring holds 256 bytes: only the newest records' blocks survive the
    // overwrite; the tail moves as the kernel would move it.
    ring.set_tail((kIdMask - 2 + 6 - 4) & kIdMask);
    const PrintkLog log = ring.read();
    EXPECT_FALSE(log.partial()) << joined(log.damage);
    EXPECT_EQ(texts(log), std::vector<std::string>(want.end() - 4, want.end()));
}

TEST(PrintkRingbuffer, LeavesOutRecordsNotCommittedOrOfAnotherId) {
    Ring ring(3, 10);
    const uint64_t a = ring.add("committed", 1);
    const uint64_t b = ring.add("being written", 2);
    const uint64_t c = ring.add("reused slot", 3);
    const uint64_t d = ring.add("reusable", 4);
    const uint64_t e = ring.add("data-less", 5);
    ring.add("finalized", 6);
    ring.mem.put(ring.desc(a), kCommitted | a);
    ring.mem.put(ring.desc(b), b);                     // reserved
    ring.mem.put(ring.desc(c), kFinalized | (c + 8));  // the slot holds a newer id
    ring.mem.put(ring.desc(d), kReusable | d);
    ring.mem.put<uint64_t>(ring.desc(e) + 16, 1);      // FAILED_LPOS: begin == next
    ring.mem.put<uint64_t>(ring.desc(e) + 8, 1);
    const PrintkLog log = ring.read();
    EXPECT_FALSE(log.partial()) << joined(log.damage);
    EXPECT_EQ(texts(log), (std::vector<std::string>{"committed", "finalized"}));
}

TEST(PrintkFormat, IndentsContinuationLinesAndEscapesOtherBytes) {
    PrintkRecord r;
    r.time_ns = 12'000'999;
    r.text = std::string("first\nsecond\ttab\x01\x7f\xc3\xa9\xc3", 21);
    EXPECT_EQ(kernel::format_dmesg_record(r),
              "[    0.012000] first\n               second\ttab\\x01\\x7f\xc3\xa9\\xc3\n");
    r.time_ns = 123456'000'000'000ULL;  // wider than %5
    r.text.clear();
    EXPECT_EQ(kernel::format_dmesg_record(r), "[123456.000000] \n");
}

// Issue 32 item 3: the guest's text under the one rule for guest text
// (escape_text) on every line of a record: a carriage return, \v, \f, ESC,
// C1 and bidi controls cannot redraw or reorder what the terminal shows, and
// a backslash is doubled so that no text of the guest passes for an escape.
TEST(PrintkFormat, EscapesWhatRedrawsOrReordersTheTerminal) {
    PrintkRecord r;
    r.time_ns = 1'000'000;
    r.text = "ok\rforged\v\f\x1b[2J\xc2\x9b\xe2\x80\xae\\x41\nsecond \xe2\x81\xa6line\r";
    EXPECT_EQ(kernel::format_dmesg_record(r),
              "[    0.001000] ok\\rforged\\x0b\\x0c\\x1b[2J\\xc2\\x9b\\xe2\\x80\\xae\\\\x41\n"
              "               second \\xe2\\x81\\xa6line\\r\n");
    EXPECT_EQ(kernel::dmesg_first_line(r),
              "[    0.001000] ok\\rforged\\x0b\\x0c\\x1b[2J\\xc2\\x9b\\xe2\\x80\\xae\\\\x41");
}

// Hostile rings: every one ends, with an Error or a partial log.

TEST(PrintkRingbufferHostile, TailFarFromHeadReadsAtMostTheRingsSlots) {
    Ring ring(3, 10);
    for (int i = 0; i < 5; ++i) ring.add("r" + std::to_string(i), i);
    ring.set_tail(5ULL << 40);  // ~2^62 ids apart: a walk to the head would not end
    const PrintkLog log = ring.read();
    EXPECT_LE(ring.mem.reads, 3 + 8 * 3u);  // the header, then 8 descriptors at most (+ info, text)
    EXPECT_TRUE(log.partial());
    EXPECT_NE(joined(log.damage).find("further apart than the ring's 8 descriptors"), std::string::npos)
        << joined(log.damage);
    EXPECT_EQ(texts(log), (std::vector<std::string>{"r0", "r1", "r2", "r3", "r4"}));
}

TEST(PrintkRingbufferHostile, TextLongerThanItsBlockIsCutAndMarked) {
    Ring ring(3, 10);
    const uint64_t id = ring.add("short", 1);
    ring.mem.put<uint16_t>(ring.info(id) + 16, 60000);
    const PrintkLog log = ring.read();
    ASSERT_EQ(log.records.size(), 1u);
    EXPECT_TRUE(log.records[0].truncated);
    EXPECT_EQ(log.records[0].text.substr(0, 5), "short");
    EXPECT_EQ(log.records[0].text.size(), 8u);  // to the block's end (8-byte aligned)
    EXPECT_NE(joined(log.damage).find("1 record: text longer than its data block"), std::string::npos)
        << joined(log.damage);
}

TEST(PrintkRingbufferHostile, BlocksShorterThanTheirIdAreLeftOut) {
    Ring ring(3, 10);
    const uint64_t id = ring.add("bad", 1);
    ring.add("good", 2);
    ring.mem.put<uint64_t>(ring.desc(id) + 16, 4);  // next = begin + 4
    const PrintkLog log = ring.read();
    EXPECT_EQ(texts(log), std::vector<std::string>{"good"});
    EXPECT_NE(joined(log.damage).find("1 record: text block shorter than its id"), std::string::npos)
        << joined(log.damage);
}

// Descriptors that all point at one data block (no kernel writes that: live
// records never share the ring's bytes): the block is read once, so the
// log's text is at most the ring's size however many descriptors there are.
TEST(PrintkRingbufferHostile, DescriptorsSharingABlockAreReadOnce) {
    Ring ring(6, 12);  // 64 descriptors, a 4 KiB data ring
    const uint64_t first = ring.add(std::string(1000, 'x'), 1);
    for (int i = 1; i < 60; ++i) {
        const uint64_t id = ring.add("r", static_cast<uint64_t>(i));
        ring.mem.put<uint64_t>(ring.desc(id) + 8, 0);      // begin: the first block's
        ring.mem.put<uint64_t>(ring.desc(id) + 16, 1008);  // next: its end
        ring.mem.put<uint16_t>(ring.info(id) + 16, 1000);  // text_len: all of it
    }
    const uint64_t last = ring.add("after", 100);  // a block of its own, after the first
    ASSERT_EQ(last - first, 60u);
    const PrintkLog log = ring.read();
    ASSERT_EQ(log.records.size(), 2u);
    EXPECT_EQ(log.records[0].text, std::string(1000, 'x'));
    EXPECT_EQ(log.records[1].text, "after");
    EXPECT_NE(joined(log.damage).find("59 records: text block overlaps an earlier record's"), std::string::npos)
        << joined(log.damage);
}

TEST(PrintkRingbufferHostile, MissingRingsGiveAPartialLog) {
    Ring ring(3, 10);
    ring.add("one", 1);
    ring.add("two", 2);
    ring.mem.unmap(Ring::kData);
    PrintkLog log = ring.read();
    EXPECT_TRUE(log.records.empty());
    EXPECT_NE(joined(log.damage).find("2 records: text not in the dump"), std::string::npos) << joined(log.damage);
    ring.mem.unmap(Ring::kDescs);
    log = ring.read();
    EXPECT_NE(joined(log.damage).find("2 records: descriptor not in the dump"), std::string::npos)
        << joined(log.damage);
}

TEST(PrintkRingbufferHostile, ImpossibleGeometryOrMissingHeaderIsAnError) {
    {
        Ring ring(3, 10);
        ring.mem.put<uint32_t>(Ring::kPrb, 60);  // count_bits
        EXPECT_THROW(ring.read(), Error);
    }
    {
        Ring ring(3, 10);
        ring.mem.put<uint32_t>(Ring::kPrb + 48, 40);  // size_bits
        try {
            ring.read();
            ADD_FAILURE() << "no error";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("size_bits 40, beyond the kernel's limits"), std::string::npos)
                << e.what();
        }
    }
    {
        Ring ring(3, 10);
        ring.mem.put(Ring::kPrbPointer, uint64_t{0xffff888012345678});  // prb points nowhere
        try {
            ring.read();
            ADD_FAILURE() << "no error";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("0xffff888012345678 (prb) is not in the dump"), std::string::npos)
                << e.what();
        }
    }
}

TEST(PrintkRingbufferHostile, LimitsBoundRecordsAndText) {
    Ring ring(4, 12);
    for (int i = 0; i < 10; ++i) ring.add(std::string(100, 'a' + i), i);
    PrintkLog log = ring.read({.max_records = 3});
    EXPECT_EQ(log.records.size(), 3u);
    EXPECT_EQ(log.records.front().text[0], 'h');  // the newest three
    EXPECT_TRUE(log.partial());
    log = ring.read({.max_text_bytes = 250});
    EXPECT_EQ(log.records.size(), 2u);
    EXPECT_NE(joined(log.damage).find("exceeds 250 bytes"), std::string::npos) << joined(log.damage);
}

TEST(PrintkVmcoreinfo, NamesTheMissingLine) {
    std::string text = Ring::vmcoreinfo();
    const std::string line = "OFFSET(prb_desc_ring.infos)=16\n";
    text.erase(text.find(line), line.size());
    Ring ring(3, 10);
    try {
        kernel::read_printk_log(parse(text), ring.mem.reader());
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("VMCOREINFO has no OFFSET(prb_desc_ring.infos)"), std::string::npos)
            << e.what();
    }
    const auto bare = parse("OSRELEASE=6.1.0\nPAGESIZE=4096\nSYMBOL(swapper_pg_dir)=ffffffff82a10000\n");
    EXPECT_FALSE(kernel::printk_format(bare));
    EXPECT_THROW(kernel::read_printk_log(bare, ring.mem.reader()), Error);
}

// The variable-length records of Linux 3.5 .. 5.9, laid out by log_store():
// a header of SIZE(printk_log) bytes, the text, 4-byte aligned; a header of
// length 0 where the next record would not fit (with room for one more
// header) sends the reader back to the start.
class LogBuf {
public:
    static constexpr uint64_t kBufPointer = 0xffffffff82251000, kLen = 0xffffffff82251010,
                              kFirst = 0xffffffff82251020, kNext = 0xffffffff82251030,
                              kBuf = 0xffff888005000000;

    LogBuf(uint32_t size, uint32_t start, bool caller) : size_(size), header_(caller ? 20 : 16), idx_(start) {
        mem.map(kBufPointer, 0x40);
        mem.put(kBufPointer, kBuf);
        mem.put<uint32_t>(kLen, size);
        mem.put<uint32_t>(kFirst, start);
        mem.put<uint32_t>(kNext, start);
        mem.map(kBuf, size);
    }

    void add(std::string_view text, uint64_t ts, uint8_t level = 6, uint32_t caller = 7) {
        const uint32_t len = static_cast<uint32_t>((header_ + text.size() + 3) & ~size_t{3});
        if (idx_ + len + header_ > size_) {
            mem.put<uint16_t>(kBuf + idx_ + 8, 0);  // the wrap marker
            idx_ = 0;
        }
        const uint64_t at = kBuf + idx_;
        mem.put(at, ts);
        mem.put<uint16_t>(at + 8, static_cast<uint16_t>(len));
        mem.put<uint16_t>(at + 10, static_cast<uint16_t>(text.size()));
        mem.put<uint16_t>(at + 12, 0);
        mem.put<uint8_t>(at + 14, 0);
        mem.put<uint8_t>(at + 15, static_cast<uint8_t>(level << 5));
        if (header_ == 20) mem.put<uint32_t>(at + 16, caller);
        mem.put_bytes(at + header_, text);
        idx_ += len;
        mem.put<uint32_t>(kNext, idx_);
    }
    void set_first(uint32_t idx) { mem.put<uint32_t>(kFirst, idx); }

    std::string vmcoreinfo() const {
        return "OSRELEASE=5.4.0-test\nPAGESIZE=4096\nSYMBOL(swapper_pg_dir)=ffffffff82209000\n"
               "SYMBOL(log_buf)=ffffffff82251000\nSYMBOL(log_buf_len)=ffffffff82251010\n"
               "SYMBOL(log_first_idx)=ffffffff82251020\nSYMBOL(log_next_idx)=ffffffff82251030\n"
               "SIZE(printk_log)=" + std::to_string(header_) + "\nOFFSET(printk_log.ts_nsec)=0\n"
               "OFFSET(printk_log.len)=8\nOFFSET(printk_log.text_len)=10\nOFFSET(printk_log.dict_len)=12\n";
    }
    PrintkLog read() const { return kernel::read_printk_log(parse(vmcoreinfo()), mem.reader()); }

    FakeKernelMemory mem;

private:
    uint32_t size_, header_, idx_;
};

TEST(PrintkLogBuf, ReadsRecordsAcrossTheWrapMarker) {
    LogBuf buf(256, 150, true);
    std::vector<std::string> want;
    for (int i = 0; i < 5; ++i) {  // 150, 190, the wrap marker at 230, 0, 40, 80
        want.push_back("old format line " + std::to_string(i));
        buf.add(want.back(), 2'000'000'000ULL + i, 4, 0x80000002u);
    }
    const PrintkLog log = buf.read();
    EXPECT_FALSE(log.partial()) << joined(log.damage);
    EXPECT_EQ(log.format, kernel::PrintkFormat::log_buf);
    EXPECT_EQ(texts(log), want);
    EXPECT_FALSE(log.records[0].sequence);
    EXPECT_EQ(log.records[0].level, 4);
    EXPECT_EQ(log.records[0].caller_id, 0x80000002u);
    EXPECT_EQ(kernel::format_dmesg_record(log.records[4]), "[    2.000000] old format line 4\n");

    LogBuf plain(256, 0, false);  // no CONFIG_PRINTK_CALLER: 16-byte headers
    plain.add("no caller", 5, 3);
    const PrintkLog p = plain.read();
    ASSERT_EQ(p.records.size(), 1u);
    EXPECT_FALSE(p.records[0].caller_id);
    EXPECT_EQ(p.records[0].level, 3);
}

TEST(PrintkLogBufHostile, LoopsAndBadLengthsEndThePartialLog) {
    {
        // log_next_idx is never reached: every record leads back to the start.
        LogBuf buf(256, 0, false);
        buf.add("a", 1);
        buf.add("b", 2);
        buf.mem.put<uint32_t>(LogBuf::kNext, 3);  // inside a record
        buf.mem.put<uint16_t>(LogBuf::kBuf + 40, 0);  // and a wrap marker after them
        const PrintkLog log = buf.read();
        EXPECT_TRUE(log.partial());
        EXPECT_NE(joined(log.damage).find("second wrap marker"), std::string::npos) << joined(log.damage);
    }
    {
        LogBuf buf(256, 0, false);
        buf.add("a", 1);
        buf.add("b", 2);
        buf.mem.put<uint16_t>(LogBuf::kBuf + 20 + 8, 5000);  // the second record's length
        const PrintkLog log = buf.read();
        EXPECT_EQ(texts(log), std::vector<std::string>{"a"});
        EXPECT_NE(joined(log.damage).find("the record at index 20 of log_buf has length 5000"), std::string::npos)
            << joined(log.damage);
    }
    {
        LogBuf buf(256, 0, false);
        buf.add("a", 1);
        buf.mem.put<uint32_t>(LogBuf::kFirst, 4096);
        EXPECT_THROW(buf.read(), Error);
    }
}

// Guest-physical memory as a few pages, for the page-table walk.
class FakePhysical {
public:
    std::map<uint64_t, std::vector<std::byte>> pages;
    uint64_t next_free = 0x100;

    kernel::PageReader reader() {
        return [this](uint64_t pfn, kernel::PageSpan out) {
            auto it = pages.find(pfn);
            if (it == pages.end()) return false;
            std::memcpy(out.data(), it->second.data(), out.size());
            return true;
        };
    }
    uint64_t& entry(uint64_t pfn, uint64_t index) {
        auto& p = pages[pfn];
        p.resize(kernel::kPageSize);
        return reinterpret_cast<uint64_t*>(p.data())[index];
    }
    // Maps `va` at 4 KiB frame `frame` (a pfn, or an mfn with `to_frame`),
    // creating tables as needed; the entry at `leaf_level` (an index of
    // `shifts`: 3 is a PMD, a 2 MiB page) is the leaf.
    void map(uint64_t top_pfn, bool five, uint64_t va, uint64_t frame, unsigned leaf_level = 4,
             uint64_t frame_offset = 0) {
        static constexpr unsigned shifts[] = {48, 39, 30, 21, 12};
        uint64_t table = top_pfn;
        for (unsigned level = five ? 0 : 1; level < 5; ++level) {
            uint64_t& e = entry(table, (va >> shifts[level]) & 511);
            if (level == leaf_level) {
                e = (frame << 12) | 0x63 | (level < 4 ? 0x80 : 0);
                return;
            }
            if (!(e & 1)) e = ((next_free++ + frame_offset) << 12) | 0x63;
            table = ((e >> 12) & 0xffffffffff) - frame_offset;
        }
    }
};

TEST(KernelVirtualMemory, WalksFourAndFiveLevelTablesAndLargePages) {
    for (const bool five : {false, true}) {
        FakePhysical phys;
        const uint64_t base = five ? 0xff11000000000000 : 0xffff888000000000;
        phys.map(0x10, five, base + 0x123000, 0x4567);
        phys.map(0x10, five, base + 0x40000000, 0x200, 3);  // 2 MiB at pfn 0x200
        phys.pages[0x4567].assign(kernel::kPageSize, std::byte{0x5a});
        kernel::PhysicalMemory memory(phys.reader());
        kernel::KernelPaging paging;
        paging.top_table = 0x10000;
        paging.five_level = five;
        kernel::KernelVirtualMemory vm(memory, paging);
        EXPECT_EQ(vm.translate(base + 0x123abc), 0x4567abcu) << five;
        EXPECT_EQ(vm.translate(base + 0x40000000 + 0x12345), 0x200000u + 0x12345) << five;
        EXPECT_FALSE(vm.translate(base + 0x124000)) << five;  // not mapped
        std::array<std::byte, 4> bytes{};
        EXPECT_TRUE(vm.read(base + 0x123ffe, std::span(bytes).first(2)));
        EXPECT_FALSE(vm.read(base + 0x123ffe, bytes));  // runs onto an unmapped page
        // Kernel-image addresses translate linearly through phys_base.
        paging.phys_base = 0x2000000;
        kernel::KernelVirtualMemory image(memory, paging);
        EXPECT_EQ(image.translate(0xffffffff81000010), 0x3000010u);
    }
}

TEST(KernelVirtualMemory, PvTablesNameMachineFrames) {
    FakePhysical phys;
    constexpr uint64_t kMfnOffset = 0x80000;  // mfn = pfn + offset
    phys.map(0x10, false, 0xffff888000005000, 0x77 + kMfnOffset, 4, kMfnOffset);
    kernel::PhysicalMemory memory(phys.reader());
    kernel::KernelPaging paging;
    paging.top_table = 0x10000;
    kernel::KernelVirtualMemory vm(memory, paging, [](uint64_t mfn) -> std::optional<uint64_t> {
        if (mfn < kMfnOffset) return std::nullopt;
        return mfn - kMfnOffset;
    });
    EXPECT_EQ(vm.translate(0xffff888000005008), 0x77008u);
    kernel::KernelVirtualMemory identity(memory, paging);  // the same tables read as pfns: nowhere
    EXPECT_FALSE(identity.translate(0xffff888000005008));
}

// The real guest: Debian's 6.1 kernel with 5-level paging (QEMU la57).


TEST(PrintkFixture, DirectMapAddressesWalkTheGuestsTables) {
    const auto& info = fixture_vmcoreinfo();
    kernel::PhysicalMemory memory(ram_reader(guest_ram()));
    const auto paging = kernel::KernelPaging::from_vmcoreinfo(info);
    EXPECT_TRUE(paging.five_level);
    ASSERT_TRUE(paging.top_table);
    kernel::KernelVirtualMemory vm(memory, paging);
    // mem_section is allocated in the direct map (0xff11000000000000 with 5 levels).
    const uint64_t mem_section = *info.symbol("mem_section");
    ASSERT_EQ(mem_section >> 44, 0xff110u);
    EXPECT_EQ(vm.translate(mem_section), mem_section - 0xff11000000000000);
}

TEST(PrintkFixture, ReadsTheGuestsLogFromItsRam) {
    kernel::PhysicalMemory memory(ram_reader(guest_ram()));
    kernel::KernelVirtualMemory vm(memory, kernel::KernelPaging::from_vmcoreinfo(fixture_vmcoreinfo()));
    const PrintkLog log = kernel::read_printk_log(
        fixture_vmcoreinfo(), [&vm](uint64_t va, std::span<std::byte> out) { return vm.read(va, out); });
    EXPECT_FALSE(log.partial()) << joined(log.damage);
    ASSERT_GT(log.records.size(), 100u);
    EXPECT_TRUE(log.records[0].text.starts_with("Linux version 6.1.0-57-amd64")) << log.records[0].text;
    EXPECT_EQ(log.records[0].time_ns, 0u);
    // Every record kept (the ring has not wrapped yet); the times need not
    // rise (the boot changes clock sources).
    for (size_t i = 1; i < log.records.size(); ++i)
        EXPECT_EQ(*log.records[i].sequence, *log.records[i - 1].sequence + 1) << i;
}

// A RAM image (the fixture's) as an HVM guest of the simulated host, dumped.
constexpr uint32_t kDomid = 23;
constexpr uint64_t kFixturePages = (128ULL << 20) / 4096;

struct DmesgDump {
    TempDir dir;
    fs::path image = dir / "linux.raw", dump = dir / "linux.core";
    std::unique_ptr<sim::Host> host;

    explicit DmesgDump(std::string_view ram) {
        std::ofstream(image, std::ios::binary).write(ram.data(), static_cast<std::streamsize>(ram.size()));
        json d = dump::hvm_domain(kDomid, "hvm", kFixturePages,
                                  json::array({json::array({0, 0x800000, kFixturePages})}));
        d["memory"] = json{{"image", image.string()}};
        host = std::make_unique<sim::Host>(dump::host_spec({d}));
        dump_domain_to_file(*host->hv, kDomid, dump);
    }
};

std::string_view fixture_ram() {
    return {reinterpret_cast<const char*>(guest_ram().data()), guest_ram().size()};
}

DmesgDump& dmesg_dump() {
    static DmesgDump d(fixture_ram());
    return d;
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

std::string ctl_dmesg(const fs::path& file) {
    RunResult r = run({"xen-dumpctl", "dmesg", file.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    return r.out;
}

bool have_makedumpfile() { return run({"sh", "-c", "command -v makedumpfile"}).exit_code == 0; }

// What `makedumpfile --dump-dmesg` writes for `dump` (its messages aside).
std::string makedumpfile_dmesg(const fs::path& dump) {
    TempDir out;
    const fs::path file = out / "dmesg.txt";
    RunResult m = run({"makedumpfile", "--dump-dmesg", dump.string(), file.string()});
    EXPECT_EQ(m.exit_code, 0) << m.out << m.err;
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void expect_same_lines(const std::string& ours, const std::string& theirs) {
    const auto our_lines = lines(ours), their_lines = lines(theirs);
    ASSERT_EQ(our_lines.size(), their_lines.size());
    for (size_t i = 0; i < our_lines.size(); ++i) ASSERT_EQ(our_lines[i], their_lines[i]) << "line " << i + 1;
    EXPECT_EQ(ours, theirs);
}

TEST(DmesgDump, EqualsMakedumpfileLineForLine) {
    DmesgDump& f = dmesg_dump();
    const std::string ours = ctl_dmesg(f.dump);
    const auto our_lines = lines(ours);
    ASSERT_GT(our_lines.size(), 100u);
    EXPECT_TRUE(our_lines[0].starts_with("[    0.000000] Linux version 6.1.0-57-amd64")) << our_lines[0];
    if (!have_makedumpfile())
        GTEST_SKIP() << "makedumpfile is not installed (apt-get install makedumpfile): not compared";
    expect_same_lines(ours, makedumpfile_dmesg(f.dump));
}

TEST(DmesgDump, JsonHasTheSameRecords) {
    DmesgDump& f = dmesg_dump();
    const auto text_lines = lines(ctl_dmesg(f.dump));
    RunResult r = run({"xen-dumpctl", "dmesg", "--json", f.dump.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json doc = json::parse(r.out);
    EXPECT_EQ(doc.at("format"), "printk_ringbuffer");
    EXPECT_FALSE(doc.at("partial").get<bool>());
    const json& records = doc.at("records");
    ASSERT_GT(records.size(), 100u);
    EXPECT_TRUE(records[0].at("text").get<std::string>().starts_with("Linux version 6.1.0-57-amd64"));
    EXPECT_EQ(records[0].at("sequence"), 0);
    EXPECT_EQ(records[0].at("time_ns"), 0);
    EXPECT_EQ(records[0].at("level"), 5);  // KERN_NOTICE, as init/main.c prints the banner
    EXPECT_EQ(records[0].at("facility"), 0);
    EXPECT_TRUE(records[0].at("caller").get<std::string>().starts_with("T")) << records[0];
    // One text line per record (these records have no embedded newline).
    size_t multi = 0;
    for (const auto& rec : records) {
        const std::string text = rec.at("text").get<std::string>();
        multi += static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    }
    EXPECT_EQ(text_lines.size(), records.size() + multi);
}

// A file without the VMCOREINFO note (Xen's sections-only layout, as `xl
// dump-core` writes): dmesg finds VMCOREINFO in its pages and prints the same.
TEST(DmesgDump, SectionsOnlyFileWithoutTheNoteGivesTheSameLog) {
    DmesgDump& f = dmesg_dump();
    TempDir out;
    const fs::path xl = out / "xl.core";
    {
        int fd = ::open(xl.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ASSERT_GE(fd, 0);
        dump_domain_to_fd(*f.host->hv, kDomid, fd, false);  // a stream: no VMCOREINFO note
        const uint64_t phoff = 0;
        const uint16_t phnum = 0;
        ASSERT_EQ(::pwrite(fd, &phoff, sizeof phoff, 32), 8);  // e_phoff
        ASSERT_EQ(::pwrite(fd, &phnum, sizeof phnum, 56), 2);  // e_phnum
        ::close(fd);
    }
    ASSERT_EQ(DumpReader::open(xl).format(), FileFormat::xen_elf);
    ASSERT_FALSE(DumpReader::open(xl).vmcoreinfo());
    EXPECT_EQ(ctl_dmesg(xl), ctl_dmesg(f.dump));
}

// A real PV guest (Xen 4.17's `xl dump-core` file of the fixture kernel, no
// VMCOREINFO note) and its conversion to v1 (which carries one): the same log.
TEST(DmesgDump, PvGuestsXlFileAndItsConversionGiveTheSameLog) {
    TempDir dir;
    const fs::path xl = dir / "xl-pv.core", v1 = dir / "pv.core";
    RunResult z = run({"zstd", "-q", "-d", "-o", xl.string(),
                       (shared_dir() / "fixtures" / "xl-dump-core-pv-6.1-128m.core.zst").string()});
    ASSERT_EQ(z.exit_code, 0) << z.err;
    RunResult c = run({"xen-dump-convert", "-q", "-o", v1.string(), xl.string()});
    ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
    ASSERT_TRUE(DumpReader::open(v1).vmcoreinfo());
    const std::string log = ctl_dmesg(v1);
    EXPECT_TRUE(log.starts_with("[    0.000000] Linux version 6.1.0-57-amd64")) << log.substr(0, 200);
    EXPECT_GT(lines(log).size(), 100u);
    EXPECT_EQ(ctl_dmesg(xl), log);
}

// The fixture's RAM with its last record made a panic (guest_ram.hpp).
DmesgDump& crashed_dump() {
    static DmesgDump d(crashed_guest_ram());
    return d;
}

// Continuation lines are indented as makedumpfile indents them; a byte
// beyond ASCII is "\xc3" where makedumpfile 1.7, formatting a signed char,
// prints "\xffffffc3" (the one difference, on purpose).
TEST(DmesgDump, MultiLineRecordsAsMakedumpfilePrintsThem) {
    const std::string ours = ctl_dmesg(crashed_dump().dump);
    EXPECT_TRUE(ours.ends_with("\n[    1.978455] Kernel panic - not syncing: testing\n               \\xc3\\x01\tz\n"))
        << ours.substr(ours.size() - std::min<size_t>(ours.size(), 200));
    if (!have_makedumpfile())
        GTEST_SKIP() << "makedumpfile is not installed (apt-get install makedumpfile): not compared";
    std::string theirs = makedumpfile_dmesg(crashed_dump().dump);
    for (size_t at = theirs.find("\\xffffff"); at != std::string::npos; at = theirs.find("\\xffffff", at))
        theirs.erase(at + 2, 6);
    expect_same_lines(ours, theirs);
}

// Issue 20 item 2: `info` quotes the first line of the log's crash reports.
TEST(DmesgDump, InfoQuotesTheCrashReportsOfTheLog) {
    const DmesgDump& crashed = crashed_dump();
    RunResult t = run({"xen-dumpctl", "info", crashed.dump.string()});
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_NE(t.out.find("\nCrash report: [    1.978455] Kernel panic - not syncing: testing\n"),
              std::string::npos)
        << t.out;
    RunResult j = run({"xen-dumpctl", "info", "--json", crashed.dump.string()});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    const json log = json::parse(j.out).at("kernel").at("log");
    EXPECT_EQ(log.at("error"), nullptr);
    EXPECT_FALSE(log.at("partial").get<bool>());
    ASSERT_EQ(log.at("crash_reports").size(), 1u) << log;
    EXPECT_EQ(log.at("crash_reports")[0].at("line"), "[    1.978455] Kernel panic - not syncing: testing");
    EXPECT_EQ(log.at("crash_reports")[0].at("sequence"), log.at("records").get<uint64_t>() - 1);

    // The guest as it was: its log, and no crash in it.
    RunResult plain = run({"xen-dumpctl", "info", dmesg_dump().dump.string()});
    EXPECT_NE(plain.out.find("\nKernel log:   " + std::to_string(log.at("records").get<uint64_t>()) + " records"),
              std::string::npos)
        << plain.out;
    EXPECT_NE(plain.out.find("\nCrash report: none in the log\n"), std::string::npos) << plain.out;
}

TEST(PrintkCrashReports, RecogniseThePanicOopsAndBugLines) {
    for (const char* yes : {"Kernel panic - not syncing: sysrq triggered crash", "Oops: 0002 [#1] PREEMPT SMP NOPTI",
                            "BUG: kernel NULL pointer dereference, address: 0000000000000000",
                            "kernel BUG at mm/slub.c:4210!", "watchdog: BUG: soft lockup - CPU#1 stuck for 22s!",
                            "general protection fault, probably for non-canonical address 0xdead: 0000 [#1] SMP",
                            "Unable to handle kernel paging request at virtual address 0000000000000010",
                            "double fault: 0000 [#1] SMP"})
        EXPECT_TRUE(kernel::is_crash_report(yes)) << yes;
    for (const char* no : {"Linux version 6.1.0", "sysrq: Trigger a crash", "  BUG: indented is a continuation",
                           "usb 1-1: Oops: not at the start", "---[ end Kernel panic - not syncing: x ]---"})
        EXPECT_FALSE(kernel::is_crash_report(no)) << no;
    Ring ring(3, 10);
    ring.add("sysrq: Trigger a crash", 1);
    ring.add("Kernel panic - not syncing: sysrq triggered crash", 2, 0);
    ring.add("CPU: 0 PID: 1 Comm: sh", 3);
    const PrintkLog log = ring.read();
    const auto reports = kernel::crash_records(log);
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_EQ(reports[0], &log.records[1]);
}

TEST(DmesgDump, AGuestWithoutAKernelGetsAClearMessage) {
    json d = dump::hvm_domain(24, "hvm", 0x800, json::array({json::array({0, 0x900000, 0x800})}));
    sim::Host host(dump::host_spec({d}));
    TempDir out;
    const fs::path path = out / "pattern.core";
    dump_domain_to_file(*host.hv, 24, path);
    RunResult r = run({"xen-dumpctl", "dmesg", path.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(path.string() + ": no VMCOREINFO of a Linux kernel in the dump"), std::string::npos)
        << r.err;
}

}  // namespace
}  // namespace xendump::test
