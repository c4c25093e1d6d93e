// The age v1 payload (C2SP age, "Payload"): a 16-byte nonce, the payload key
// HKDF-SHA-256(file key, nonce, "payload"), and STREAM: ChaCha20-Poly1305
// over 64 KiB chunks, chunk i under the nonce of its 11-byte big-endian
// counter i and a last-chunk flag byte (1 for the last chunk, else 0).
#include <algorithm>

#include "age/age.hpp"
#include "io/random_access.hpp"
#include "age/encoding.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::age {
namespace {

std::array<uint8_t, kAeadNonceSize> chunk_nonce(uint64_t index, bool last) {
    std::array<uint8_t, kAeadNonceSize> n{};
    for (int i = 0; i < 8; ++i) n[10 - i] = static_cast<uint8_t>(index >> (8 * i));
    n[11] = last ? 1 : 0;
    return n;
}

Key32 payload_key(const FileKey& file_key, std::span<const uint8_t> nonce) {
    Key32 k;
    hkdf_sha256(file_key.span(), nonce, "payload", k.span());
    return k;
}

std::string chunk_name(uint64_t index) { return "chunk " + std::to_string(index); }

// How far from a chunk's place a reader looks for the counter it was
// sealed under, to tell a moved chunk from an altered one (error path only).
constexpr uint64_t kMovedSearch = 256;

}  // namespace

// --- Encryptor --------------------------------------------------------------

Encryptor::Encryptor(std::span<const Recipient> recipients) {
    if (recipients.empty()) throw Error("age: no recipient to encrypt to");
    FileKey file_key;
    random_bytes(file_key.span());
    std::vector<Stanza> stanzas;
    for (const Recipient& r : recipients) stanzas.push_back(r.wrap(file_key));
    head_ = encode_header(stanzas, file_key);
    std::array<uint8_t, kPayloadNonceSize> nonce{};
    random_bytes(nonce);
    head_.insert(head_.end(), nonce.begin(), nonce.end());
    payload_key_ = payload_key(file_key, nonce);
}

Encryptor::~Encryptor() = default;

uint64_t Encryptor::file_size(uint64_t plaintext_size) const noexcept {
    uint64_t n = plaintext_size == 0 ? 1 : (plaintext_size + kChunkSize - 1) / kChunkSize;
    return head_.size() + plaintext_size + n * kTagSize;
}

void Encryptor::seal(uint64_t index, std::span<const uint8_t> plain, bool last, std::span<uint8_t> out) {
    seal(index, std::span(&plain, 1), last, out);
}

void Encryptor::seal(uint64_t index, std::span<const std::span<const uint8_t>> plain, bool last, std::span<uint8_t> out) {
    size_t size = 0;
    for (const auto& p : plain) size += p.size();
    if (size > kChunkSize || (!last && size != kChunkSize))
        throw Error("age: " + chunk_name(index) + " has " + std::to_string(size) + " bytes; every chunk but the last has " +
                    std::to_string(kChunkSize) + ", the last at most that");
    if (last && size == 0 && index != 0)
        throw Error("age: the last chunk may be empty only when it is the only one (" + chunk_name(index) + ")");
    if (out.size() != size + kTagSize) throw Error("age: the output of " + chunk_name(index) + " is of the wrong size");
    {
        std::lock_guard lock(mutex_);
        if (last_ && index > *last_)
            throw Error("age: " + chunk_name(index) + " comes after the last chunk, " + chunk_name(*last_));
        if (last && last_ && *last_ != index)
            throw Error("age: " + chunk_name(index) + " sealed as the last chunk, but " + chunk_name(*last_) + " was");
        if (last && sealed_.size() > index + 1)
            throw Error("age: " + chunk_name(index) + " sealed as the last chunk after a later chunk");
        if (index >= sealed_.size()) sealed_.resize(index + 1);
        // Sealing a chunk twice would use its nonce twice: never.
        if (sealed_[index]) throw Error("age: " + chunk_name(index) + " was already sealed");
        sealed_[index] = true;
        ++count_;
        if (last) last_ = index;
    }
    aead_seal(payload_key_.span(), chunk_nonce(index, last), plain, out);
}

bool Encryptor::complete() const {
    std::lock_guard lock(mutex_);
    return last_ && count_ == *last_ + 1;
}

// --- StreamWriter -----------------------------------------------------------

StreamWriter::StreamWriter(std::span<const Recipient> recipients, std::function<void(std::span<const uint8_t>)> out)
    : enc_(recipients), out_(std::move(out)) {
    buffer_.bytes().reserve(kChunkSize);
}

void StreamWriter::write(std::span<const uint8_t> data) {
    if (finished_) throw Error("age: write after finish");
    if (!started_) {
        out_(enc_.head());
        started_ = true;
    }
    Bytes& buf = buffer_.bytes();
    while (!data.empty()) {
        // A full chunk is sealed only once more data follows: the last chunk
        // may be full, and must then carry the flag.
        if (buf.size() == kChunkSize) emit(false);
        size_t n = std::min(data.size(), kChunkSize - buf.size());
        buf.insert(buf.end(), data.begin(), data.begin() + static_cast<std::ptrdiff_t>(n));
        data = data.subspan(n);
        size_ += n;
    }
}

void StreamWriter::finish() {
    if (finished_) return;
    if (!started_) {
        out_(enc_.head());
        started_ = true;
    }
    emit(true);
    finished_ = true;
}

void StreamWriter::emit(bool last) {
    Bytes& buf = buffer_.bytes();
    sealed_.resize(buf.size() + kTagSize);
    enc_.seal(index_++, buf, last, sealed_);
    out_(sealed_);
    wipe(buf.data(), buf.size());
    buf.clear();
}

// --- Decryptor --------------------------------------------------------------

Decryptor::Decryptor(const io::RandomAccess& in, std::span<const Identity> identities, size_t cache_chunks)
    : in_(in), name_(in.name()), cache_(cache_chunks) {
    open(identities);
}

Decryptor::Decryptor(int fd, const std::string& name, std::span<const Identity> identities, size_t cache_chunks)
    : own_(regular_file(fd, name)), in_(*own_), name_(name), cache_(cache_chunks) {
    open(identities);
}

void Decryptor::open(std::span<const Identity> identities) {
    FileHeader fh = read_header(in_);
    stanzas_ = std::move(fh.header.stanzas);
    header_size_ = fh.header.size;
    file_size_ = fh.file_size;
    // age: a passphrase (scrypt) stanza must be alone, so that a file
    // encrypted with a passphrase cannot also be opened by a key (spec "scrypt").
    for (const Stanza& s : stanzas_)
        if (s.args[0] == "scrypt" && stanzas_.size() != 1)
            throw Error("age header: an scrypt stanza must be the only one", name_, s.offset);

    std::optional<FileKey> file_key;
    for (const Identity& id : identities) {
        for (const Stanza& s : stanzas_) {
            try {
                file_key = id.unwrap(s);
            } catch (const Error& e) {
                throw Error("age header: " + e.message(), name_, s.offset);
            }
            if (file_key) break;
        }
        if (file_key) break;
    }
    if (!file_key) {
        std::string types;
        for (const Stanza& s : stanzas_) types += (types.empty() ? "" : ", ") + s.args[0];
        throw Error("no identity matches: the file is encrypted to " + std::to_string(stanzas_.size()) +
                        " recipient(s) (" + types + "), none of them one of the " + std::to_string(identities.size()) +
                        " identities given",
                    name_);
    }
    Key32 mac_key;
    hkdf_sha256(file_key->span(), {}, "header", mac_key.span());
    auto mac = hmac_sha256(mac_key.span(), std::span<const uint8_t>(fh.bytes).first(fh.header.mac_input_size));
    if (!equal_ct(mac, fh.header.mac))
        throw Error("age header: the header MAC does not match: the header was altered", name_,
                    fh.header.mac_input_size - 3);

    if (file_size_ < payload_offset())
        throw Error("age header: the file ends inside the 16-byte payload nonce", name_, header_size_);
    std::array<uint8_t, kPayloadNonceSize> nonce{};
    if (in_.read_at(header_size_, std::as_writable_bytes(std::span(nonce))) != nonce.size())
        throw Error("the file shrank while it was read", name_, header_size_);
    payload_key_ = payload_key(*file_key, nonce);

    const uint64_t payload = file_size_ - payload_offset();
    if (payload == 0) throw Error("age payload: no chunk after the nonce: the file is truncated", name_, payload_offset());
    chunks_ = (payload + kSealedChunkSize - 1) / kSealedChunkSize;
    const uint64_t last_sealed = payload - (chunks_ - 1) * kSealedChunkSize;
    if (last_sealed < kTagSize)
        throw Error("age payload: " + chunk_name(chunks_ - 1) + ", the last, is " + std::to_string(last_sealed) +
                        " bytes, shorter than its 16-byte tag: the file is truncated (or has bytes appended)",
                    name_, chunk_offset(chunks_ - 1));
    size_ = (chunks_ - 1) * kChunkSize + (last_sealed - kTagSize);
    // The last chunk is checked now: it proves the size (nothing cut off at
    // a chunk boundary, nothing appended) before anything is read.
    SecretBuffer last;
    decrypt(chunks_ - 1, last);
    if (last.bytes().empty() && chunks_ > 1)
        throw Error("age payload: " + chunk_name(chunks_ - 1) +
                        ", the last, is empty, which only the first chunk of an empty file may be",
                    name_, chunk_offset(chunks_ - 1));
    cache_.keep(chunks_ - 1, std::move(last));
}

Decryptor::~Decryptor() = default;

SecretBuffer Decryptor::chunk(uint64_t index) {
    if (index >= chunks_)
        throw Error("age payload: " + chunk_name(index) + " is past the end (" + std::to_string(chunks_) + " chunks)", name_);
    const size_t n = index == chunks_ - 1 ? static_cast<size_t>(size_ - index * kChunkSize) : kChunkSize;
    SecretBuffer out(n);
    copy_chunk(index, 0, out.bytes());
    return out;
}

size_t Decryptor::copy_chunk(uint64_t index, size_t in, std::span<uint8_t> out) {
    const auto copy = [&](const Bytes& plain) {
        const size_t n = std::min(out.size(), plain.size() - std::min(in, plain.size()));
        std::copy_n(plain.begin() + static_cast<std::ptrdiff_t>(in), n, out.begin());
        return n;
    };
    {
        std::lock_guard lock(cache_mutex_);
        if (const SecretBuffer* kept = cache_.find(index)) return copy(kept->bytes());
    }
    // The whole chunk wanted (a reader going through the file): decrypted
    // where it goes, not kept (it will not be read again soon).
    if (in == 0 && out.size() >= plain_size(index)) {
        const size_t n = plain_size(index);
        decrypt(index, out.first(n));
        return n;
    }
    // Decrypted without the lock: other threads read other chunks meanwhile.
    SecretBuffer plain;
    decrypt(index, plain);
    const size_t n = copy(plain.bytes());
    std::lock_guard lock(cache_mutex_);
    cache_.keep(index, std::move(plain));  // unless another thread kept it meanwhile
    return n;
}

void Decryptor::decrypt(uint64_t index, SecretBuffer& out) {
    out.bytes().resize(plain_size(index));
    decrypt(index, std::span<uint8_t>(out.bytes()));
}

size_t Decryptor::plain_size(uint64_t index) const noexcept {
    return index == chunks_ - 1 ? static_cast<size_t>(size_ - index * kChunkSize) : kChunkSize;
}

void Decryptor::decrypt(uint64_t index, std::span<uint8_t> out) {
    const bool last = index == chunks_ - 1;
    const uint64_t offset = chunk_offset(index);
    const size_t len = last ? static_cast<size_t>(file_size_ - offset) : kSealedChunkSize;
    // Ciphertext (nothing secret), in a buffer each thread keeps: a reader
    // going through a file would otherwise zero 64 KiB per chunk for nothing.
    thread_local Bytes sealed_buffer;
    if (sealed_buffer.size() < len) sealed_buffer.resize(kSealedChunkSize);
    const std::span<uint8_t> sealed(sealed_buffer.data(), len);
    if (in_.read_at(offset, std::as_writable_bytes(sealed)) != len)
        throw Error("age payload: the file ends inside " + chunk_name(index) + " (it shrank while open)", name_, offset);
    decrypted_.fetch_add(1, std::memory_order_relaxed);
    if (aead_open(payload_key_.span(), chunk_nonce(index, last), sealed, out)) return;

    // Not authentic. Say why, as far as the keys can tell.
    Bytes probe(len - kTagSize);
    auto opens_as = [&](uint64_t i, bool flag) {
        bool ok = aead_open(payload_key_.span(), chunk_nonce(i, flag), sealed, probe);
        wipe(probe.data(), probe.size());
        return ok;
    };
    std::string what;
    uint64_t where = offset;
    if (opens_as(index, !last)) {
        what = last ? chunk_name(index) + ", the last in the file, is not sealed as the last chunk: the file is "
                                          "truncated at a chunk boundary"
                    : chunk_name(index) + " is sealed as the last chunk, but " +
                          std::to_string(file_size_ - offset - len) + " bytes follow it: bytes were appended";
    } else if (last && index > 0 && previous_is_last(index - 1)) {
        what = chunk_name(index - 1) + " is sealed as the last chunk, but " + std::to_string(len) +
               " bytes follow it: bytes were appended";
        where = chunk_offset(index - 1);
    } else {
        std::optional<uint64_t> moved;
        const uint64_t lo = index > kMovedSearch ? index - kMovedSearch : 0;
        for (uint64_t i = lo; i < std::min(chunks_, index + kMovedSearch) && !moved; ++i)
            if (i != index && (opens_as(i, false) || opens_as(i, true))) moved = i;
        if (moved)
            what = chunk_name(index) + " holds " + chunk_name(*moved) + ": chunks were reordered or duplicated";
        else if (last && len < kSealedChunkSize)
            what = chunk_name(index) + ", the last (" + std::to_string(len) +
                   " bytes), does not authenticate: the file is truncated inside a chunk, or the chunk was altered";
        else
            what = chunk_name(index) + " does not authenticate: its bytes were altered";
    }
    wipe(out.data(), out.size());
    throw Error("age payload: " + what, name_, where);
}

bool Decryptor::previous_is_last(uint64_t index) {
    Bytes sealed(kSealedChunkSize), probe(kChunkSize);
    bool ok = in_.read_at(chunk_offset(index), std::as_writable_bytes(std::span(sealed))) == sealed.size() &&
              aead_open(payload_key_.span(), chunk_nonce(index, true), sealed, probe);
    wipe(probe.data(), probe.size());
    return ok;
}

size_t Decryptor::read(uint64_t offset, std::span<uint8_t> out) {
    size_t done = 0;
    while (done < out.size() && offset < size_) {
        const size_t n = copy_chunk(offset / kChunkSize, static_cast<size_t>(offset % kChunkSize), out.subspan(done));
        if (n == 0) break;
        done += n;
        offset += n;
    }
    return done;
}

}  // namespace xendump::age
