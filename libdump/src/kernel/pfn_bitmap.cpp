// kernel::PfnBitmap (dump_level.hpp): blocks of bits, a few in memory, the
// rest in an unnamed temporary file; all-zero and all-one blocks are only a
// count.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "io/temp_file.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/kernel/dump_level.hpp"

namespace xendump::kernel {

namespace {

constexpr uint64_t kWords = PfnBitmap::kBlockBits / 64;
constexpr size_t kBlockBytes = kWords * sizeof(uint64_t);

// The words of a block of `bits` bits, every one set (none past `bits`).
void fill_ones(uint64_t* w, uint64_t bits) {
    const uint64_t full = bits / 64;
    std::fill(w, w + full, ~uint64_t{0});
    std::fill(w + full, w + kWords, uint64_t{0});
    if (bits % 64) w[full] = (uint64_t{1} << (bits % 64)) - 1;
}

uint64_t popcount(const uint64_t* w) {
    uint64_t n = 0;
    for (uint64_t i = 0; i < kWords; ++i) n += static_cast<uint64_t>(std::popcount(w[i]));
    return n;
}

}  // namespace

struct PfnBitmap::Impl {
    struct Block {
        uint32_t ones = 0;    // set bits: 0 and bits_in() need no storage
        int16_t slot = -1;    // in the cache, or -1
        bool stored = false;  // the file holds it (valid when not cached, neither all zero nor all one)
    };
    struct Slot {
        uint64_t block = 0;
        uint64_t used = 0;  // tick of the last use: the least recent is evicted
        bool dirty = false;
    };

    uint64_t size = 0;
    std::vector<Block> blocks;
    // The cache: up to kCachedBlocks slots, allocated at the first use.
    std::vector<Slot> slots;
    std::unique_ptr<uint64_t[]> words;
    size_t capacity = 0;
    uint64_t tick = 0;
    UniqueFd file;
    std::string dir;
    // The cache (slots, words, file, Block::slot and stored) for const
    // members, which may run at once; the others have the bitmap to
    // themselves and take no lock. Block::ones changes only in those.
    std::mutex mutex;

    explicit Impl(uint64_t n) : size(n), blocks((n + kBlockBits - 1) / kBlockBits) {}

    uint64_t bits_in(uint64_t b) const { return std::min(kBlockBits, size - b * kBlockBits); }
    bool zero(uint64_t b) const { return blocks[b].ones == 0; }
    bool full(uint64_t b) const { return blocks[b].ones == bits_in(b); }

    // The block's words in a cache slot (the mutex held, or the bitmap the
    // caller's alone). Valid until the
    // next load(): a caller works on one block of a bitmap at a time.
    uint64_t* load(uint64_t b) {
        Block& blk = blocks[b];
        if (blk.slot >= 0) {
            slots[static_cast<size_t>(blk.slot)].used = ++tick;
            return words.get() + static_cast<size_t>(blk.slot) * kWords;
        }
        if (!words) {
            capacity = static_cast<size_t>(std::min<uint64_t>(kCachedBlocks, blocks.size()));
            words.reset(new uint64_t[capacity * kWords]);
            slots.reserve(capacity);
        }
        size_t s;
        if (slots.size() < capacity) {
            s = slots.size();
            slots.emplace_back();
        } else {
            s = static_cast<size_t>(std::min_element(slots.begin(), slots.end(), [](const Slot& x, const Slot& y) {
                                        return x.used < y.used;
                                    }) - slots.begin());
            evict(s);
        }
        uint64_t* w = words.get() + s * kWords;
        if (zero(b)) {
            std::fill(w, w + kWords, uint64_t{0});
        } else if (full(b)) {
            fill_ones(w, bits_in(b));
        } else {
            if (!blk.stored || !file) throw Error("internal error: a block of a pfn bitmap is neither cached nor stored");
            const long got = util::pread_full(file.get(), w, kBlockBytes, b * kBlockBytes);
            if (got != static_cast<long>(kBlockBytes)) {
                if (got >= 0) errno = EIO;
                throw_errno("cannot read back a bitmap of pfns from a temporary file", dir, b * kBlockBytes);
            }
        }
        slots[s] = {b, ++tick, false};
        blk.slot = static_cast<int16_t>(s);
        return w;
    }

    // Frees slot `s`, writing its block to the file when it changed and
    // needs storage.
    void evict(size_t s) {
        Slot& slot = slots[s];
        Block& blk = blocks[slot.block];
        if (slot.dirty) {
            if (zero(slot.block) || full(slot.block)) {
                blk.stored = false;
            } else {
                if (!file) {
                    io::UnnamedTempFile f = io::unnamed_temp_file("a bitmap of pfns");
                    file = std::move(f.fd);
                    dir = std::move(f.dir);
                }
                const uint64_t at = slot.block * kBlockBytes;
                const size_t done = util::pwrite_full(file.get(), words.get() + s * kWords, kBlockBytes, at);
                if (done < kBlockBytes)
                    throw_errno("cannot write a bitmap of pfns to a temporary file", dir, at + done);
                blk.stored = true;
            }
        }
        blk.slot = -1;
        slot.dirty = false;
    }

    // Changes block `b` by f(words) and recounts it.
    template <class F>
    void modify(uint64_t b, F&& f) {
        uint64_t* w = load(b);
        f(w);
        blocks[b].ones = static_cast<uint32_t>(popcount(w));
        slots[static_cast<size_t>(blocks[b].slot)].dirty = true;
    }

    // One bit to `value`.
    void assign(uint64_t pfn, bool value) {
        const uint64_t b = pfn / kBlockBits, i = pfn % kBlockBits;
        if (value ? full(b) : zero(b)) return;
        uint64_t& w = load(b)[i / 64];
        const uint64_t bit = uint64_t{1} << (i % 64);
        if (((w & bit) != 0) == value) return;
        w ^= bit;
        blocks[b].ones = value ? blocks[b].ones + 1 : blocks[b].ones - 1;
        slots[static_cast<size_t>(blocks[b].slot)].dirty = true;
    }

    // Block `b`'s bits into `out` (kWords words).
    void copy_block(uint64_t b, uint64_t* out) {
        if (zero(b)) {
            std::fill(out, out + kWords, uint64_t{0});
        } else if (full(b)) {
            fill_ones(out, bits_in(b));
        } else {
            std::lock_guard lock(mutex);
            const uint64_t* w = load(b);
            std::copy(w, w + kWords, out);
        }
    }

    // Block `b` all ones, without reading it.
    void fill_block(uint64_t b) {
        Block& blk = blocks[b];
        blk.ones = static_cast<uint32_t>(bits_in(b));
        blk.stored = false;
        if (blk.slot >= 0) {
            fill_ones(words.get() + static_cast<size_t>(blk.slot) * kWords, bits_in(b));
            slots[static_cast<size_t>(blk.slot)].dirty = true;
        }
    }
};

PfnBitmap::PfnBitmap() noexcept = default;
PfnBitmap::PfnBitmap(uint64_t size) : impl_(std::make_unique<Impl>(size)) {}
PfnBitmap::PfnBitmap(PfnBitmap&& other) noexcept = default;
PfnBitmap& PfnBitmap::operator=(PfnBitmap&& other) noexcept = default;
PfnBitmap::~PfnBitmap() = default;

PfnBitmap::PfnBitmap(const PfnBitmap& other) {
    if (!other.impl_) return;
    impl_ = std::make_unique<Impl>(other.impl_->size);
    Impl& to = *impl_;
    std::vector<uint64_t> buf(kWords);
    for (uint64_t b = 0; b < to.blocks.size(); ++b) {
        const uint32_t ones = other.impl_->blocks[b].ones;
        if (ones == 0) continue;
        if (ones == to.bits_in(b)) {
            to.blocks[b].ones = ones;
            continue;
        }
        other.impl_->copy_block(b, buf.data());
        to.modify(b, [&](uint64_t* w) { std::copy(buf.begin(), buf.end(), w); });
    }
}

PfnBitmap& PfnBitmap::operator=(const PfnBitmap& other) {
    if (this != &other) *this = PfnBitmap(other);
    return *this;
}

uint64_t PfnBitmap::size() const { return impl_ ? impl_->size : 0; }

// The members below read impl_->size, not size(): an exported function is
// not inlined within the shared library (it could be interposed), and test()
// runs once per page.
bool PfnBitmap::test(uint64_t pfn) const {
    if (!impl_ || pfn >= impl_->size) return false;
    Impl& m = *impl_;
    const uint64_t b = pfn / kBlockBits, i = pfn % kBlockBits;
    if (m.zero(b)) return false;
    if (m.full(b)) return true;
    std::lock_guard lock(m.mutex);
    return m.load(b)[i / 64] >> (i % 64) & 1;
}

void PfnBitmap::set(uint64_t pfn) {
    if (impl_ && pfn < impl_->size) impl_->assign(pfn, true);
}

void PfnBitmap::reset(uint64_t pfn) {
    if (impl_ && pfn < impl_->size) impl_->assign(pfn, false);
}

void PfnBitmap::set_range(uint64_t first, uint64_t end) {
    end = std::min(end, size());
    Impl* m = impl_.get();
    while (first < end) {
        const uint64_t b = first / kBlockBits, from = first % kBlockBits;
        const uint64_t to = std::min(end - b * kBlockBits, m->bits_in(b));
        first = b * kBlockBits + to;
        if (m->full(b)) continue;
        if (from == 0 && to == m->bits_in(b)) {
            m->fill_block(b);
            continue;
        }
        // Only the words of the range are counted again (a run may be one pfn).
        uint64_t* w = m->load(b);
        uint32_t ones = m->blocks[b].ones;
        for (uint64_t i = from; i < to;) {
            const uint64_t n = std::min<uint64_t>(64 - i % 64, to - i);
            uint64_t& word = w[i / 64];
            const uint64_t before = word;
            word |= (n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1)) << (i % 64);
            ones += static_cast<uint32_t>(std::popcount(word) - std::popcount(before));
            i += n;
        }
        if (ones != m->blocks[b].ones) {
            m->blocks[b].ones = ones;
            m->slots[static_cast<size_t>(m->blocks[b].slot)].dirty = true;
        }
    }
}

uint64_t PfnBitmap::count() const {
    uint64_t n = 0;
    if (impl_)
        for (const auto& b : impl_->blocks) n += b.ones;
    return n;
}

uint64_t PfnBitmap::next_set(uint64_t pfn) const {
    const uint64_t n = size();
    while (pfn < n) {
        Impl& m = *impl_;
        const uint64_t b = pfn / kBlockBits;
        if (m.full(b)) return pfn;
        if (!m.zero(b)) {
            std::lock_guard lock(m.mutex);
            const uint64_t* w = m.load(b);
            for (uint64_t i = pfn % kBlockBits; i < m.bits_in(b);) {
                const uint64_t bits = w[i / 64] >> (i % 64);
                if (bits) return b * kBlockBits + i + static_cast<uint64_t>(std::countr_zero(bits));
                i = (i / 64 + 1) * 64;
            }
        }
        pfn = (b + 1) * kBlockBits;
    }
    return n;
}

void PfnBitmap::merge_masked(const PfnBitmap& other, const PfnBitmap& mask) {
    if (!impl_ || !other.impl_ || !mask.impl_) return;
    Impl& m = *impl_;
    Impl& o = *other.impl_;
    Impl& k = *mask.impl_;
    const uint64_t nblocks = std::min({m.blocks.size(), o.blocks.size(), k.blocks.size()});
    std::vector<uint64_t> a(kWords), c(kWords), limit(kWords);
    for (uint64_t b = 0; b < nblocks; ++b) {
        if (m.full(b) || o.zero(b) || k.zero(b)) continue;
        const uint64_t bits = m.bits_in(b);
        if (o.full(b) && k.full(b) && o.bits_in(b) >= bits && k.bits_in(b) >= bits) {
            m.fill_block(b);
            continue;
        }
        o.copy_block(b, a.data());
        k.copy_block(b, c.data());
        fill_ones(limit.data(), bits);  // no bit past this bitmap's size
        m.modify(b, [&](uint64_t* w) {
            for (uint64_t i = 0; i < kWords; ++i) w[i] |= a[i] & c[i] & limit[i];
        });
    }
}

size_t PfnBitmap::bytes() const {
    if (!impl_) return 0;
    std::lock_guard lock(impl_->mutex);
    return impl_->blocks.capacity() * sizeof(Impl::Block) + impl_->slots.capacity() * sizeof(Impl::Slot) +
           (impl_->words ? impl_->capacity * kBlockBytes : 0);
}

}  // namespace xendump::kernel
