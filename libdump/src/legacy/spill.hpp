// Out-of-core building blocks of the legacy converter (issue 19: memory that
// does not grow with the guest): an unnamed temporary file, a file of
// fixed-size records that stays in memory while it is small, an external
// sort (sorted runs on disk, merged), and a bitmap whose pages exist only
// where a bit was set.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <queue>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "xendump/fd.hpp"

namespace xendump::io {
class SealedTempFile;
}

namespace xendump::legacy {

// An io::SealedTempFile (sealed under a key of its own: no plaintext on
// disk) with positional reads and writes that throw Error naming the
// directory and offset.
class TempFile {
public:
    TempFile();
    ~TempFile();
    TempFile(TempFile&&) noexcept;
    TempFile& operator=(TempFile&&) noexcept;
    void write(uint64_t offset, const void* data, size_t size) const;
    void read(uint64_t offset, void* out, size_t size) const;

private:
    std::unique_ptr<io::SealedTempFile> file_;
};

// A fixed-capacity array of trivially copyable T in its own anonymous
// mapping: given back to the kernel when it goes (malloc would keep a freed
// run buffer in its heap, where the next phase's peak adds to it).
template <class T>
class MappedArray {
    static_assert(std::is_trivially_copyable_v<T>);

public:
    MappedArray() = default;
    explicit MappedArray(size_t capacity) : mem_(capacity * sizeof(T)), cap_(capacity) {}
    T* data() { return static_cast<T*>(mem_.data()); }
    const T* data() const { return static_cast<const T*>(mem_.data()); }
    size_t size() const { return size_; }
    size_t capacity() const { return cap_; }
    bool full() const { return size_ == cap_; }
    void push_back(const T& v) { data()[size_++] = v; }
    void resize(size_t n) { size_ = n; }  // n <= capacity; new elements uninitialised
    void clear() { size_ = 0; }
    T& operator[](size_t i) { return data()[i]; }
    const T& operator[](size_t i) const { return data()[i]; }
    T* begin() { return data(); }
    T* end() { return data() + size_; }
    std::span<T> span() { return {data(), size_}; }

private:
    class Mapping {
    public:
        Mapping() = default;
        explicit Mapping(size_t bytes);
        ~Mapping();
        Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
        Mapping& operator=(Mapping&& o) noexcept {
            std::swap(p_, o.p_);
            std::swap(bytes_, o.bytes_);
            return *this;
        }
        void* data() const { return p_; }

    private:
        void* p_ = nullptr;
        size_t bytes_ = 0;
    };
    Mapping mem_;
    size_t cap_ = 0, size_ = 0;
};

// Maps `bytes` of anonymous memory (Error when it cannot); frees it.
void* map_anonymous(size_t bytes);
void unmap_anonymous(void* p, size_t bytes);

template <class T>
MappedArray<T>::Mapping::Mapping(size_t bytes) : p_(bytes ? map_anonymous(bytes) : nullptr), bytes_(bytes) {}
template <class T>
MappedArray<T>::Mapping::~Mapping() {
    if (p_) unmap_anonymous(p_, bytes_);
}

// Records appended in order, then read back by position. The first
// kBuffer bytes stay in memory; beyond them they go to a TempFile a buffer
// at a time, so memory stays kBuffer whatever the count.
template <class T>
class RecordFile {
    static_assert(std::is_trivially_copyable_v<T>);

public:
    static constexpr size_t kBuffer = (size_t{1} << 20) / sizeof(T);

    void push(const T& r) {
        if (buf_.capacity() == 0) buf_ = MappedArray<T>(kBuffer);
        if (buf_.full()) flush();
        buf_.push_back(r);
        ++count_;
    }
    uint64_t size() const { return count_; }
    bool on_disk() const { return file_ != nullptr; }
    // Records [first, first + out.size()).
    void read(uint64_t first, std::span<T> out) const {
        size_t done = 0;
        if (first < flushed_) {
            const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), flushed_ - first));
            file_->read(first * sizeof(T), out.data(), n * sizeof(T));
            done = n;
        }
        for (; done < out.size(); ++done) out[done] = buf_[static_cast<size_t>(first + done - flushed_)];
    }

private:
    void flush() {
        if (!file_) file_ = std::make_unique<TempFile>();
        file_->write(flushed_ * sizeof(T), buf_.data(), buf_.size() * sizeof(T));
        flushed_ += buf_.size();
        buf_.clear();
    }
    std::unique_ptr<TempFile> file_;
    MappedArray<T> buf_;
    uint64_t count_ = 0, flushed_ = 0;
};

// Reads a RecordFile from `first` on, a window at a time.
template <class T>
class RecordCursor {
public:
    RecordCursor(const RecordFile<T>& file, uint64_t first, uint64_t end, size_t window)
        : file_(file), at_(first), end_(end), window_(std::max<size_t>(1, window)) {}
    bool done() const { return at_ >= end_; }
    const T& head() {
        if (i_ == w_.size()) {
            if (w_.capacity() == 0) w_ = MappedArray<T>(static_cast<size_t>(std::min<uint64_t>(window_, end_ - at_)));
            w_.resize(static_cast<size_t>(std::min<uint64_t>(w_.capacity(), end_ - at_)));
            file_.read(at_, w_.span());
            i_ = 0;
        }
        return w_[i_];
    }
    void next() {
        head();
        ++i_;
        ++at_;
    }

private:
    const RecordFile<T>& file_;
    uint64_t at_, end_;
    size_t window_;
    MappedArray<T> w_;
    size_t i_ = 0;
};

// Sorts any number of records in bounded memory: runs of kRunBytes sorted
// in memory and written out, then merged (a window of each run in memory).
template <class T, class Less>
class ExternalSorter {
public:
    static constexpr size_t kRunBytes = size_t{16} << 20;
    static constexpr size_t kMergeBytes = size_t{16} << 20;

    explicit ExternalSorter(Less less = {}) : less_(less) {}
    void push(const T& r) {
        if (buf_.capacity() == 0) buf_ = MappedArray<T>(kRun);
        if (buf_.full()) spill();
        buf_.push_back(r);
    }
    // Calls f(record) for every record, in order; the sorter is spent after.
    template <class F>
    void drain(F&& f) {
        if (starts_.empty()) {
            std::sort(buf_.begin(), buf_.end(), less_);
            for (const T& r : buf_) f(r);
            buf_ = {};
            return;
        }
        spill();
        buf_ = {};
        starts_.push_back(runs_.size());
        const size_t nr = starts_.size() - 1;
        const size_t window = std::max<size_t>(64, kMergeBytes / sizeof(T) / nr);
        std::vector<RecordCursor<T>> cursors;
        cursors.reserve(nr);
        for (size_t r = 0; r < nr; ++r) cursors.emplace_back(runs_, starts_[r], starts_[r + 1], window);
        auto later = [&](size_t a, size_t b) { return less_(cursors[b].head(), cursors[a].head()); };
        std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
        for (size_t r = 0; r < nr; ++r)
            if (!cursors[r].done()) heap.push(r);
        while (!heap.empty()) {
            const size_t r = heap.top();
            heap.pop();
            f(cursors[r].head());
            cursors[r].next();
            if (!cursors[r].done()) heap.push(r);
        }
    }

private:
    static constexpr size_t kRun = kRunBytes / sizeof(T);
    void spill() {
        std::sort(buf_.begin(), buf_.end(), less_);
        starts_.push_back(runs_.size());
        for (const T& r : buf_) runs_.push(r);
        buf_.clear();
    }
    Less less_;
    MappedArray<T> buf_;
    RecordFile<T> runs_;
    std::vector<uint64_t> starts_;  // first record of each run
};

// One bit for each value of [base, base + bits), in anonymous memory mapped
// without reserving it: only the pages that hold a set bit are ever made
// (a reader of a clear region sees the kernel's zero page), so it costs the
// spread of the values set, not the range.
class SparseBitmap {
public:
    SparseBitmap() = default;
    SparseBitmap(uint64_t base, uint64_t bits);
    ~SparseBitmap();
    SparseBitmap(SparseBitmap&& o) noexcept { *this = std::move(o); }
    SparseBitmap& operator=(SparseBitmap&& o) noexcept;

    bool test(uint64_t v) const {
        if (v < base_ || v - base_ >= bits_) return false;
        const uint64_t i = v - base_;
        return (words_[i >> 6] >> (i & 63)) & 1;
    }
    // Sets the bit; returns whether it was set before. `v` must be in range.
    bool test_and_set(uint64_t v) {
        const uint64_t i = v - base_;
        uint64_t& w = words_[i >> 6];
        const uint64_t bit = uint64_t{1} << (i & 63);
        const bool was = (w & bit) != 0;
        w |= bit;
        return was;
    }
    // Clears every bit and gives the pages back.
    void clear();

private:
    uint64_t* words_ = nullptr;
    uint64_t base_ = 0, bits_ = 0;
    size_t bytes_ = 0;
};

}  // namespace xendump::legacy
