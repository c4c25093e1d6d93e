#include "reader/flattened_image.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <optional>

#include "io/flattened.hpp"
#include "xendump/error.hpp"

namespace xendump::reader {

namespace flat = io::flat;

FlattenedImage::FlattenedImage(const ReadAt& read, uint64_t stored_size, std::string name) : name_(std::move(name)) {
    std::array<std::byte, flat::kHeaderSize> header{};
    const size_t got = static_cast<size_t>(std::min<uint64_t>(stored_size, header.size()));
    read(0, std::span(header).first(got));
    flat::check_header(std::span(header).first(got), name_);
    uint64_t at = flat::kHeaderSize;
    for (;;) {
        std::array<std::byte, sizeof(flat::RecordHead)> head{};
        const size_t n = static_cast<size_t>(std::min<uint64_t>(stored_size - at, head.size()));
        read(at, std::span(head).first(n));
        const std::optional<flat::Record> r = flat::parse_record(at, std::span(head).first(n), name_);
        if (!r) {
            if (stored_size - at > head.size()) flat::throw_after_end(at, name_);
            break;
        }
        if (r->size > stored_size - r->data_at()) flat::throw_truncated_data(*r, stored_size - r->data_at(), name_);
        place(r->offset, r->size, r->data_at());
        ++records_;
        size_ = std::max(size_, r->end());
        at = r->data_at() + r->size;
    }
}

uint64_t FlattenedImage::stored_at(uint64_t start, const Stretch& s, uint64_t x) noexcept {
    const uint64_t k = x - start + s.phase;
    return s.data + k / s.unit * (s.unit + sizeof(flat::RecordHead)) + k % s.unit;
}

FlattenedImage::Stretch FlattenedImage::from(uint64_t start, const Stretch& s, uint64_t x) noexcept {
    const uint64_t k = x - start + s.phase;
    return {s.end, s.data + k / s.unit * (s.unit + sizeof(flat::RecordHead)), s.unit, k % s.unit};
}

// The record's bytes [offset, offset + size) at `data`: what the stretches
// held there goes (the later record wins), then the record joins the
// stretch it continues, or makes one.
void FlattenedImage::place(uint64_t offset, uint64_t size, uint64_t data) {
    const uint64_t a = offset, b = offset + size;
    auto it = map_.lower_bound(a);
    if (it != map_.begin()) {
        auto before = std::prev(it);
        if (before->second.end > a) {
            const Stretch tail = from(before->first, before->second, a);
            before->second.end = a;
            it = map_.emplace_hint(it, a, tail);
        }
    }
    while (it != map_.end() && it->first < b) {
        if (it->second.end > b) {
            const Stretch tail = from(it->first, it->second, b);
            it = map_.erase(it);
            it = map_.emplace_hint(it, b, tail);
            break;
        }
        it = map_.erase(it);
    }
    if (it != map_.begin()) {
        auto before = std::prev(it);
        Stretch& s = before->second;
        const uint64_t k = a - before->first + s.phase;
        if (s.end == a && k % s.unit == 0 && size <= s.unit &&
            s.data + k / s.unit * (s.unit + sizeof(flat::RecordHead)) == data) {
            s.end = b;
            return;
        }
    }
    if (map_.size() >= kMaxStretches)
        throw Error("flattened file: more than " + std::to_string(kMaxStretches) +
                        " separate stretches of records, too many to read in place; rearrange it first "
                        "(xen-dump-convert FILE -o OUT, or makedumpfile -R OUT < FILE) and read the result",
                    name_, data - sizeof(flat::RecordHead));
    map_.emplace_hint(it, a, Stretch{b, data, size, 0});
}

void FlattenedImage::read(uint64_t offset, std::span<std::byte> out, const ReadAt& read) const {
    const uint64_t stop = offset + out.size();
    uint64_t x = offset;
    auto it = map_.upper_bound(x);
    if (it != map_.begin() && std::prev(it)->second.end > x) --it;
    for (; x < stop; ++it) {
        const uint64_t next = it == map_.end() ? stop : std::min(stop, it->first);
        if (x < next) {  // no record wrote these bytes: a hole
            std::memset(out.data() + (x - offset), 0, static_cast<size_t>(next - x));
            x = next;
        }
        if (it == map_.end()) break;
        const uint64_t end = std::min(stop, it->second.end);
        while (x < end) {
            const Stretch& s = it->second;
            const uint64_t within = (x - it->first + s.phase) % s.unit;
            const uint64_t n = std::min(end - x, s.unit - within);
            read(stored_at(it->first, s, x), out.subspan(static_cast<size_t>(x - offset), static_cast<size_t>(n)));
            x += n;
        }
    }
}

}  // namespace xendump::reader
