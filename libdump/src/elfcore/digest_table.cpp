#include "elfcore/digest_table.hpp"

#include <cerrno>

#include "elfcore/notes.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/format.hpp"

namespace xendump::elfcore {

namespace {

constexpr uint64_t kDigest = sizeof(XXH128_canonical_t);

}  // namespace

DigestTable::DigestTable(std::string name, size_t window) : name_(std::move(name)), window_(window) {
    if (window_ == 0) throw Error("internal error: digest window 0", name_);
}

void DigestTable::place_in(io::Sink& out, uint64_t offset) {
    if (size() != 0) throw Error("internal error: digest table placed after its first digest", name_);
    place_ = &out;
    offset_ = offset;
}

void DigestTable::add(const XXH128_canonical_t& digest) {
    buf_.reserve(window_);  // once: the window, never more
    buf_.push_back(digest);
    if (buf_.size() == window_) flush();
}

void DigestTable::add(std::span<const XXH128_canonical_t> digests) {
    buf_.reserve(window_);
    while (!digests.empty()) {
        const size_t take = std::min(digests.size(), window_ - buf_.size());
        buf_.insert(buf_.end(), digests.begin(), digests.begin() + static_cast<std::ptrdiff_t>(take));
        digests = digests.subspan(take);
        if (buf_.size() == window_) flush();
    }
}

void DigestTable::replace(uint64_t index, const XXH128_canonical_t& digest, io::Sink& out) {
    if (index >= size()) throw Error("internal error: digest " + std::to_string(index) + " replaced before it was added", name_);
    if (index >= flushed_) {
        buf_[static_cast<size_t>(index - flushed_)] = digest;
        return;
    }
    const auto bytes = std::as_bytes(std::span(&digest, 1));
    if (place_) {
        if (place_ != &out) throw Error("internal error: digest table replaced through another output", name_);
        place_->rewrite_ahead(offset_ + index * kDigest, bytes);
    } else {
        spill_->write(index * kDigest, bytes.data(), bytes.size());
    }
}

void DigestTable::flush() {
    const auto bytes = std::as_bytes(std::span(buf_));
    if (place_) {
        place_->write_ahead(offset_ + flushed_ * kDigest, bytes);
    } else {
        if (!spill_) spill_ = std::make_unique<io::SealedTempFile>("the page digests of " + name_);
        spill_->write(flushed_ * kDigest, bytes.data(), bytes.size());
    }
    flushed_ += buf_.size();
    buf_.clear();
}

void DigestTable::write_to(io::Sink& out) {
    if (place_) {
        if (&out != place_ || out.offset() != offset_)
            throw Error("internal error: digest table not at its planned offset", name_, out.offset());
        out.skip_written(flushed_ * kDigest);
    } else if (flushed_) {
        // The spilled windows, one window at a time through a buffer of that size.
        std::vector<XXH128_canonical_t> window(window_);
        for (uint64_t k = 0; k < flushed_;) {
            const size_t n = static_cast<size_t>(std::min<uint64_t>(window_, flushed_ - k));
            const auto bytes = std::as_writable_bytes(std::span(window).first(n));
            spill_->read(k * kDigest, bytes.data(), bytes.size());
            out.write(bytes);
            k += n;
        }
    }
    out.write(std::as_bytes(std::span(buf_)));
}

uint64_t write_digest_note(io::Sink& out, DigestTable& chunks, const XXH128_canonical_t& notes_digest,
                           const XXH128_canonical_t& table_digest) {
    const format::DigestDescHead head{format::kDigestXxh3_128, format::kDigestChunkPages};
    const uint64_t descsz = sizeof head + kDigest * (chunks.size() + 2);
    // 8 + 16k bytes after a 24-byte header: the next note stays 8-aligned unpadded.
    if (note_padded_desc_size(format::kNameXenCore, descsz) != descsz)
        throw Error("internal error: NT_XEN_DIGEST would need padding");
    const auto header = note_header(format::kNameXenCore, format::kNtXenDigest, descsz);
    out.write(header);
    out.write(bytes_of(head));
    chunks.write_to(out);
    out.write(bytes_of(notes_digest));
    out.write(bytes_of(table_digest));
    return header.size() + descsz;
}

}  // namespace xendump::elfcore
