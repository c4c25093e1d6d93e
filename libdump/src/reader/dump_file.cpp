#include "reader/dump_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <iterator>

#include "age/age.hpp"
#include "io/flattened.hpp"
#include "io/random_access.hpp"
#include "store/object_reader.hpp"
#include "reader/checked.hpp"
#include "reader/flattened_image.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::reader {

// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
// (forever); the file is refused by its type before anything is read.
// Chunks a reader keeps decrypted: a compact file's reads alternate between
// its descriptors, its bitmaps and its page data (256 KiB a page is at most
// away from its descriptor's chunk in practice), 64 KiB each.
constexpr size_t kCachedChunks = 8;

DumpFile::DumpFile(std::string path, const Identities& get_identities) : path_(std::move(path)) {
    if (s3::is_url(path_)) {
        auto object = s3::open_object(path_);
        object_ = object.get();
        in_ = std::move(object);
        size_ = in_->size();
        open_age(get_identities);
        return;
    }
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd_ < 0) throw_errno("cannot open", path_);
    take_size();
    // Regular files never block; clear the flag all the same for the reads.
    if (int fl = ::fcntl(fd_, F_GETFL); fl >= 0) ::fcntl(fd_, F_SETFL, fl & ~O_NONBLOCK);
    try {
        open_age(get_identities);
    } catch (...) {
        ::close(fd_);
        throw;
    }
}

void DumpFile::open_age(const Identities& get_identities) {
    if (!starts_as_age(*in_)) return;
    const std::vector<age::Identity> identities = get_identities ? get_identities() : std::vector<age::Identity>{};
    if (identities.empty()) {
        // The header is parsed all the same: a damaged one says so first.
        const age::FileHeader h = age::read_header(*in_);
        throw Error("encrypted (age, " + std::to_string(h.header.stanzas.size()) +
                        " recipients): an identity (private key) is needed to read it",
                    path_);
    }
    age_ = std::make_unique<age::Decryptor>(*in_, identities, kCachedChunks);
    size_ = age_->size();
}

std::optional<StoreInfo> DumpFile::store() const {
    if (!object_) return std::nullopt;
    const auto f = object_->fetched();
    return StoreInfo{path_, object_->size(), object_->block_size(), f.requests, f.bytes};
}

DumpFile::Identities DumpFile::identities_of(const OpenOptions& options) {
    return [&options] {
        std::vector<age::Identity> out;
        for (const auto& f : options.identity_files) {
            auto ids = age::read_identities_file(f, options.allow_insecure_identity);
            std::move(ids.begin(), ids.end(), std::back_inserter(out));
        }
        return out;
    };
}

bool starts_as_age(int fd, uint64_t size) {
    char head[kAgeFirstLine.size()];
    if (size < sizeof head) return false;
    const long n = util::pread_full(fd, head, sizeof head, 0);
    return n == static_cast<long>(sizeof head) && std::string_view(head, sizeof head) == kAgeFirstLine;
}

bool starts_as_age(const io::RandomAccess& in) {
    std::array<char, kAgeFirstLine.size()> head{};
    return in.size() >= head.size() && in.read_at(0, std::as_writable_bytes(std::span(head))) == head.size() &&
           std::string_view(head.data(), head.size()) == kAgeFirstLine;
}

std::optional<EncryptionInfo> DumpFile::encryption() const {
    if (!age_) return std::nullopt;
    EncryptionInfo out;
    for (const age::Stanza& s : age_->stanzas()) out.recipient_types.push_back(s.args.empty() ? std::string() : s.args[0]);
    out.header_size = age_->header_size();
    out.chunks = age_->chunks();
    out.file_size = age_->chunk_offset(age_->chunks() - 1) + (age_->size() - (age_->chunks() - 1) * age::kChunkSize) + age::kTagSize;
    out.chunks_decrypted = age_->chunks_decrypted();
    return out;
}

DumpFile::DumpFile(UniqueFd fd, std::string name) : path_(std::move(name)), fd_(fd.release()) { take_size(); }

DumpFile::DumpFile(std::unique_ptr<io::RandomAccess> in)
    : path_(in->name()), size_(in->size()), in_(std::move(in)) {}

void DumpFile::take_size() {
    struct stat st{};
    if (fstat(fd_, &st) != 0) {
        int e = errno;
        ::close(fd_);
        throw Error("cannot stat", path_, std::nullopt, e);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd_);
        throw Error(std::string("not a regular file (") + util::file_kind(st.st_mode) + "): a dump is read from a file",
                    path_);
    }
    size_ = static_cast<uint64_t>(st.st_size);
    in_ = std::make_unique<io::FdRandomAccess>(fd_, size_, path_);
}

DumpFile::~DumpFile() {
    age_.reset();  // it reads in_, which reads fd_
    if (fd_ >= 0) ::close(fd_);
}

bool DumpFile::unflatten() {
    if (flat_) return true;
    std::array<std::byte, 16> head{};
    if (size_ < head.size()) return false;
    read_stored(0, head, "file header");
    if (!io::flat::has_signature(head)) return false;
    const FlattenedImage::ReadAt read = [this](uint64_t offset, std::span<std::byte> out) {
        read_stored(offset, out, "flattened file");
    };
    flat_ = std::make_unique<FlattenedImage>(read, size_, path_);
    stored_size_ = size_;
    size_ = flat_->size();
    return true;
}

void DumpFile::read_exact(uint64_t offset, std::span<std::byte> out, const std::string& structure) const {
    if (!range_inside(offset, out.size(), size_))
        throw Error(structure + ": " + past_end("offset", offset, "size", out.size(), size_), path_, offset);
    if (flat_) {
        // Offsets in errors are the stored file's.
        flat_->read(offset, out, [&](uint64_t at, std::span<std::byte> part) { read_stored(at, part, structure); });
        return;
    }
    read_stored(offset, out, structure);
}

void DumpFile::read_stored(uint64_t offset, std::span<std::byte> out, const std::string& structure) const {
    if (age_) {
        // Decrypted chunk by chunk; a chunk that does not authenticate throws
        // naming it and its offset in the file, before any of it is copied.
        const size_t got = age_->read(offset, std::span(reinterpret_cast<uint8_t*>(out.data()), out.size()));
        if (got < out.size()) throw Error(structure + ": the plaintext ends early", path_, offset + got);
        return;
    }
    size_t n = 0;
    try {
        n = in_->read_at(offset, out);
    } catch (const Error& e) {
        throw Error(structure + ": " + e.message(), path_, offset, e.sys_errno());
    }
    const uint64_t end = offset + n;
    if (n < out.size()) throw Error(structure + ": file shrank while reading (end at " + hex(end) + ")", path_, end);
}

std::vector<std::byte> DumpFile::read_bytes(uint64_t offset, uint64_t size, const std::string& structure) const {
    if (!range_inside(offset, size, size_))
        throw Error(structure + ": " + past_end("offset", offset, "size", size, size_), path_, offset);
    std::vector<std::byte> out(static_cast<size_t>(size));
    read_exact(offset, out, structure);
    return out;
}

}  // namespace xendump::reader
