#include "reader/digest_table.hpp"

#include <algorithm>
#include <string>

#include "xendump/error.hpp"

namespace xendump::reader {

DigestTable::DigestTable(const DumpFile& file, const Note& note, uint64_t window)
    : file_(file), note_(note), window_size_(std::max<uint64_t>(window, 1)) {
    if (note_.desc_size >= sizeof head_)
        file_.read_exact(note_.desc_offset, std::as_writable_bytes(std::span(&head_, 1)), "NT_XEN_DIGEST note");
}

uint64_t DigestTable::chunks(uint64_t pages) const {
    return head_.chunk_pages ? (pages + head_.chunk_pages - 1) / head_.chunk_pages : 0;
}

std::optional<Finding> DigestTable::format_problem(uint64_t pages) const {
    const uint64_t want = sizeof head_ + 16 * (chunks(pages) + 2);
    if (note_.desc_size >= sizeof head_ && head_.algorithm == format::kDigestXxh3_128 && head_.chunk_pages != 0 &&
        note_.desc_size == want)
        return std::nullopt;
    return Finding{"digest-format", "NT_XEN_DIGEST note", note_.offset,
                   "algorithm " + std::to_string(head_.algorithm) + ", chunk_pages " +
                       std::to_string(head_.chunk_pages) + ", descsz " + std::to_string(note_.desc_size) +
                       ": expected algorithm 1 (XXH3-128) and " + std::to_string(want) + " bytes for " +
                       std::to_string(pages) + " pages"};
}

DigestTable::Canonical DigestTable::at(uint64_t k) {
    const uint64_t stored = note_.desc_size < sizeof head_ ? 0 : (note_.desc_size - sizeof head_) / 16;
    if (k >= stored)
        throw Error("NT_XEN_DIGEST note: digest " + std::to_string(k) + " is past its " + std::to_string(stored),
                    file_.path(), note_.offset);
    if (k < first_ || k - first_ >= window_.size()) {
        first_ = k / window_size_ * window_size_;
        window_.resize(static_cast<size_t>(std::min(window_size_, stored - first_)));
        file_.read_exact(offset_of(first_), std::as_writable_bytes(std::span(window_)), "NT_XEN_DIGEST note");
    }
    return window_[static_cast<size_t>(k - first_)];
}

}  // namespace xendump::reader
