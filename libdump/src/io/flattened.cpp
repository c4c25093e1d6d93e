#include "io/flattened.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "io/sink.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::io {

namespace flat {

BigEndian64 BigEndian64::of(int64_t v) noexcept {
    BigEndian64 out;
    auto u = static_cast<uint64_t>(v);
    for (int i = 7; i >= 0; --i, u >>= 8) out.bytes[static_cast<size_t>(i)] = static_cast<std::byte>(u & 0xff);
    return out;
}

int64_t BigEndian64::value() const noexcept {
    uint64_t u = 0;
    for (std::byte b : bytes) u = (u << 8) | static_cast<uint64_t>(b);
    return static_cast<int64_t>(u);
}

std::array<std::byte, kHeaderSize> Header::ours() {
    Header h;
    std::memcpy(h.signature.data(), kSignature.data(), kSignature.size());
    h.type = BigEndian64::of(kType);
    h.version = BigEndian64::of(kVersion);
    std::array<std::byte, kHeaderSize> out{};
    std::memcpy(out.data(), &h, sizeof h);
    return out;
}

RecordHead RecordHead::of(uint64_t offset, uint64_t size) noexcept {
    return {BigEndian64::of(static_cast<int64_t>(offset)), BigEndian64::of(static_cast<int64_t>(size))};
}

RecordHead RecordHead::end() noexcept { return {BigEndian64::of(kEndFlag), BigEndian64::of(kEndFlag)}; }

bool has_signature(std::span<const std::byte> head) {
    Header ours;
    std::memcpy(ours.signature.data(), kSignature.data(), kSignature.size());
    return head.size() >= ours.signature.size() &&
           std::memcmp(head.data(), ours.signature.data(), ours.signature.size()) == 0;
}

namespace {
std::string number(int64_t v) { return std::to_string(v); }
}  // namespace

void check_header(std::span<const std::byte> got, const std::string& name) {
    if (!has_signature(got))
        throw Error("not a flattened dump: the header's signature is not \"makedumpfile\"", name, 0);
    if (got.size() < kHeaderSize)
        throw Error("flattened header: the stream ends after " + std::to_string(got.size()) + " of its " +
                        std::to_string(kHeaderSize) + " bytes: truncated",
                    name, got.size());
    Header h;
    std::memcpy(&h, got.data(), sizeof h);
    if (h.type.value() != kType)
        throw Error("flattened header: type " + number(h.type.value()) + " is not " + number(kType) +
                        " (makedumpfile's flattened format)",
                    name, offsetof(Header, type));
}

std::optional<Record> parse_record(uint64_t at, std::span<const std::byte> got, const std::string& name) {
    if (got.empty())
        throw Error("the flattened stream ends without its end record (offset = size = -1): truncated", name, at);
    if (got.size() < sizeof(RecordHead))
        throw Error("flattened record: the stream ends within its 16-byte head (" + std::to_string(got.size()) +
                        " bytes of it): truncated",
                    name, at);
    RecordHead h;
    std::memcpy(&h, got.data(), sizeof h);
    const int64_t offset = h.offset.value(), size = h.size.value();
    if (offset == kEndFlag && size == kEndFlag) return std::nullopt;
    const std::string what = "flattened record of " + number(size) + " bytes at offset " + number(offset) + ": ";
    if (offset < 0) throw Error(what + "a negative offset, and not the end record (offset = size = -1)", name, at);
    if (size <= 0)
        throw Error(what + "a record holds 1 byte or more (makedumpfile -R stops at it), and this is not the end "
                           "record (offset = size = -1)",
                    name, at);
    const auto off = static_cast<uint64_t>(offset), n = static_cast<uint64_t>(size);
    if (off > kMaxCarriedSize || n > kMaxCarriedSize - off)
        throw Error(what + "ends past the largest file a flattened stream may carry (" + util::hex(kMaxCarriedSize) +
                        " bytes)",
                    name, at);
    return Record{at, off, n};
}

void throw_truncated_data(const Record& r, uint64_t got, const std::string& name) {
    throw Error("flattened record of " + std::to_string(r.size) + " bytes at offset " + std::to_string(r.offset) +
                    ": the stream ends after " + std::to_string(got) + " of them: truncated",
                name, r.at);
}

void throw_after_end(uint64_t end_at, const std::string& name) {
    throw Error("bytes follow the flattened stream's end record (offset = size = -1): a stream ends there", name,
                end_at);
}

namespace {

// Fills `out` from `read` as far as the stream goes; returns the bytes got.
size_t read_full(const ReadSome& read, std::span<std::byte> out) {
    size_t got = 0;
    while (got < out.size()) {
        const size_t n = read(out.subspan(got));
        if (n == 0) break;
        got += n;
    }
    return got;
}

}  // namespace

Rearranged rearrange(const ReadSome& read, const std::string& name, int out_fd, const std::string& out_name,
                     const std::atomic<bool>* cancel, const std::function<void(uint64_t)>& progress) {
    constexpr size_t kBuffer = 1 << 20;
    std::vector<std::byte> buf(kBuffer);
    Rearranged done;
    auto step = [&](uint64_t n) {
        done.stream_bytes += n;
        if (cancel && cancel->load()) throw Error("cancelled", name, done.stream_bytes);
        if (progress) progress(done.stream_bytes);
    };
    const size_t header = read_full(read, std::span(buf).first(kHeaderSize));
    check_header(std::span(buf).first(header), name);
    step(header);
    for (;;) {
        const uint64_t at = done.stream_bytes;
        const size_t n = read_full(read, std::span(buf).first(sizeof(RecordHead)));
        const std::optional<Record> r = parse_record(at, std::span(buf).first(n), name);
        step(n);
        if (!r) {
            if (read(std::span(buf).first(1)) != 0) throw_after_end(at, name);
            return done;
        }
        for (uint64_t got = 0; got < r->size;) {
            const size_t want = static_cast<size_t>(std::min<uint64_t>(kBuffer, r->size - got));
            const size_t k = read_full(read, std::span(buf).first(want));
            if (k < want) throw_truncated_data(*r, got + k, name);
            const size_t w = util::pwrite_full(out_fd, buf.data(), k, r->offset + got);
            if (w < k) throw_errno("cannot write the rearranged file", out_name, r->offset + got + w);
            got += k;
            step(k);
        }
        ++done.records;
        done.size = std::max(done.size, r->end());
    }
}

}  // namespace flat

FlattenedOutput::FlattenedOutput(int fd, bool seekable, std::string name, std::span<const age::Recipient> recipients,
                                 unsigned seal_threads)
    : out_(std::make_unique<Sink>(fd, seekable, false, name, recipients, seal_threads)), name_(std::move(name)) {
    const auto header = flat::Header::ours();
    out_->write(header);
}

FlattenedOutput::~FlattenedOutput() = default;

void FlattenedOutput::cancel_on(const std::atomic<bool>* flag) { out_->cancel_on(flag); }

uint64_t FlattenedOutput::stream_size() const noexcept { return out_->file_size(); }

void FlattenedOutput::record(uint64_t offset, std::span<const std::byte> data) {
    while (!data.empty()) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(data.size(), kRecordBytes));
        const flat::RecordHead head = flat::RecordHead::of(offset, n);
        const iovec iov[2] = {{const_cast<flat::RecordHead*>(&head), sizeof head},
                              {const_cast<std::byte*>(data.data()), n}};
        out_->writev(iov);
        ++records_;
        offset += n;
        data = data.subspan(n);
        written_end_ = std::max(written_end_, offset);
    }
}

void FlattenedOutput::flush(Gathered& g) {
    record(g.offset, g.bytes);
    g.bytes.clear();
}

void FlattenedOutput::gather(Gathered& g, uint64_t offset, const std::byte* data, uint64_t n) {
    if (!g.bytes.empty() && offset != g.end()) flush(g);
    if (g.bytes.empty()) g.offset = offset;
    while (n > 0) {
        const size_t part = static_cast<size_t>(std::min<uint64_t>(n, kRecordBytes - g.bytes.size()));
        if (data) {
            g.bytes.insert(g.bytes.end(), data, data + part);
            data += part;
        } else {
            g.bytes.resize(g.bytes.size() + part);
        }
        n -= part;
        if (g.bytes.size() == kRecordBytes) {
            flush(g);
            g.offset += kRecordBytes;
        }
    }
}

void FlattenedOutput::put(uint64_t at, const std::byte* data, uint64_t n) {
    if (n == 0) return;
    if (!data && n > kZeroRun) {
        if (!stream_.bytes.empty()) flush(stream_);  // a hole: the next bytes start a record of their own
        return;
    }
    gather(stream_, at, data, n);
}

void FlattenedOutput::rewrite(uint64_t offset, std::span<const std::byte> data) {
    if (data.empty()) return;
    // Bytes still gathered go first, so that the rewrite comes after them.
    if (!stream_.bytes.empty() && offset < stream_.end() && offset + data.size() > stream_.offset) flush(stream_);
    gather(rewrites_, offset, data.data(), data.size());
}

void FlattenedOutput::ahead(uint64_t offset, std::span<const std::byte> data) { record(offset, data); }

void FlattenedOutput::finish(uint64_t size) {
    if (!stream_.bytes.empty()) flush(stream_);
    if (!rewrites_.bytes.empty()) flush(rewrites_);
    if (written_end_ < size) {
        const std::byte zero{0};
        record(size - 1, std::span(&zero, 1));
    }
    const flat::RecordHead end = flat::RecordHead::end();
    out_->write(std::as_bytes(std::span(&end, 1)));
    out_->finish();
}

}  // namespace xendump::io
