// age recipients and identities: X25519 (C2SP age "The X25519 recipient
// type") and ssh-ed25519 (age's SSH recipient types, as age 1.1 implements
// them), their text forms, and the files age -R / -i read.
#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>

#include "age/age.hpp"
#include "age/encoding.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::age {
namespace {

constexpr std::string_view kX25519Label = "age-encryption.org/v1/X25519";
constexpr std::string_view kSshEd25519Label = "age-encryption.org/v1/ssh-ed25519";
constexpr std::string_view kRecipientHrp = "age";
constexpr std::string_view kIdentityHrp = "AGE-SECRET-KEY-";
constexpr std::string_view kSshType = "ssh-ed25519";
constexpr std::string_view kOpensshBegin = "-----BEGIN OPENSSH PRIVATE KEY-----";
constexpr std::string_view kOpensshEnd = "-----END OPENSSH PRIVATE KEY-----";
constexpr size_t kMaxKeyFile = 16 << 20;  // age's limit on identity files

// Reads the SSH wire format (RFC 4251 section 5): uint32 and length-prefixed strings.
class WireReader {
public:
    WireReader(std::span<const uint8_t> data, const char* what) : data_(data), what_(what) {}
    uint32_t u32() {
        need(4);
        uint32_t v = uint32_t(data_[0]) << 24 | uint32_t(data_[1]) << 16 | uint32_t(data_[2]) << 8 | data_[3];
        data_ = data_.subspan(4);
        return v;
    }
    std::span<const uint8_t> bytes() {
        uint32_t n = u32();
        need(n);
        auto out = data_.first(n);
        data_ = data_.subspan(n);
        return out;
    }
    std::string_view text() {
        auto b = bytes();
        return {reinterpret_cast<const char*>(b.data()), b.size()};
    }
    std::span<const uint8_t> rest() const { return data_; }

private:
    void need(size_t n) const {
        if (data_.size() < n) throw Error(std::string(what_) + " is truncated");
    }
    std::span<const uint8_t> data_;
    const char* what_;
};

void put_string(Bytes& out, std::span<const uint8_t> s) {
    uint32_t n = static_cast<uint32_t>(s.size());
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(n >> shift));
    out.insert(out.end(), s.begin(), s.end());
}

std::span<const uint8_t> as_bytes(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// The SSH wire form of an ed25519 public key: string "ssh-ed25519", string key.
Bytes ssh_wire_key(std::span<const uint8_t, kKeySize> key) {
    Bytes out;
    put_string(out, as_bytes(kSshType));
    put_string(out, key);
    return out;
}

// age's ssh-ed25519 stanza tag: the first 4 bytes of SHA-256 of the wire key, base64.
std::string ssh_tag(const Bytes& ssh_key) {
    auto h = sha256(ssh_key);
    return base64_encode(std::span<const uint8_t>(h).first(4));
}

// The ssh-ed25519 recipient's tweak: HKDF-SHA-256 with an empty key, the wire key as salt.
Key32 ssh_tweak(const Bytes& ssh_key) {
    Key32 t;
    hkdf_sha256({}, ssh_key, kSshEd25519Label, t.span());
    return t;
}

Bytes concat(std::span<const uint8_t> a, std::span<const uint8_t> b) {
    Bytes out(a.begin(), a.end());
    out.insert(out.end(), b.begin(), b.end());
    return out;
}

// The X25519 share of a stanza argument: canonical base64 of 32 bytes.
Point decode_share(const std::string& arg, const char* type) {
    auto b = base64_decode_canonical(arg);
    if (!b || b->size() != kKeySize)
        throw Error(std::string(type) + " stanza: the ephemeral share is not 32 bytes of canonical base64");
    Point p{};
    std::copy(b->begin(), b->end(), p.begin());
    return p;
}

// Both types wrap the 16-byte file key as 32 bytes (key and tag) with a zero nonce.
constexpr std::array<uint8_t, kAeadNonceSize> kZeroNonce{};

Stanza wrap_with(std::span<const uint8_t, kKeySize> shared, const Point& share, const Point& recipient,
                 std::string_view label, std::vector<std::string> args, const FileKey& file_key) {
    Key32 wrap_key;
    hkdf_sha256(shared, concat(share, recipient), label, wrap_key.span());
    Stanza s{std::move(args), Bytes(kFileKeySize + kTagSize)};
    aead_seal(wrap_key.span(), kZeroNonce, file_key.span(), s.body);
    return s;
}

std::optional<FileKey> unwrap_with(std::span<const uint8_t, kKeySize> shared, const Point& share,
                                   const Point& recipient, std::string_view label, const Bytes& body) {
    Key32 wrap_key;
    hkdf_sha256(shared, concat(share, recipient), label, wrap_key.span());
    FileKey key;
    if (!aead_open(wrap_key.span(), kZeroNonce, body, key.span())) return std::nullopt;
    return key;
}

void check_body(const Stanza& s, const char* type) {
    if (s.body.size() != kFileKeySize + kTagSize)
        throw Error(std::string(type) + " stanza: the wrapped file key is " + std::to_string(s.body.size()) +
                    " bytes, not 32");
}

// The keys of a recipients or identities file, one a line, '#' comments
// and empty lines left out; an error names "FILE:LINE" but not the line's
// text, which may be confidential.
template <class Key>
std::vector<Key> parse_lines(std::string_view text, const std::string& name, const char* what) {
    std::vector<Key> out;
    size_t line_no = 0;
    while (!text.empty()) {
        size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        ++line_no;
        if (line.empty() || line.front() == '#') continue;
        try {
            out.push_back(Key::parse(line));
        } catch (const Error& e) {
            throw Error(e.message(), name + ":" + std::to_string(line_no));
        }
    }
    if (out.empty()) throw Error(std::string("holds no ") + what, name);
    return out;
}

// A key file's text; regular files only, at most kMaxKeyFile bytes.
std::string read_key_file(const std::filesystem::path& file, bool identities, bool allow_insecure) {
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) throw_errno("cannot open", file.string());
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat", file.string());
    if (!S_ISREG(st.st_mode)) throw Error(std::string("is ") + util::file_kind(st.st_mode) + ", not a key file", file.string());
    if (identities && !allow_insecure && (st.st_mode & (S_IRGRP | S_IROTH))) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        throw Error(std::string("the identity file may be read by group or others (mode ") + mode +
                        "): make it private (chmod 600) or allow it explicitly (--allow-insecure-identity)",
                    file.string());
    }
    if (static_cast<uint64_t>(st.st_size) > kMaxKeyFile)
        throw Error("is larger than " + std::to_string(kMaxKeyFile >> 20) + " MiB, not a key file", file.string());
    std::string text(static_cast<size_t>(st.st_size), '\0');
    long n = util::pread_full(fd.get(), text.data(), text.size(), 0);
    if (n < 0) throw_errno("cannot read", file.string());
    text.resize(static_cast<size_t>(n));
    return text;
}

}  // namespace

// --- Recipients -------------------------------------------------------------

Recipient Recipient::x25519(const Point& public_key) {
    Recipient r;
    r.kind_ = Kind::x25519;
    r.x25519_ = public_key;
    return r;
}

Recipient Recipient::parse(std::string_view text) {
    if (text.starts_with("age1") || text.starts_with("AGE1")) {
        auto b = bech32_decode(text);
        if (!b || b->hrp != kRecipientHrp)
            throw Error("not a valid age1… recipient (Bech32 checksum, characters or case)");
        if (b->data.size() != kKeySize) throw Error("an age1… recipient holds 32 bytes, this one " + std::to_string(b->data.size()));
        Point p{};
        std::copy(b->data.begin(), b->data.end(), p.begin());
        return x25519(p);
    }
    if (text.starts_with("ssh-")) {
        size_t sp = text.find(' ');
        std::string_view type = text.substr(0, sp);
        if (type != kSshType)
            throw Error("SSH " + std::string(type) + " recipients are not supported (only ssh-ed25519)");
        std::string_view rest = sp == std::string_view::npos ? std::string_view{} : text.substr(sp + 1);
        std::string_view b64 = rest.substr(0, rest.find(' '));
        auto wire = base64_decode_padded(b64);
        if (!wire) throw Error("an ssh-ed25519 recipient whose key is not base64");
        WireReader r(*wire, "the ssh-ed25519 public key");
        if (r.text() != kSshType) throw Error("an ssh-ed25519 recipient whose key is of another type");
        auto key = r.bytes();
        if (key.size() != kKeySize || !r.rest().empty())
            throw Error("an ssh-ed25519 recipient whose key is not 32 bytes");
        Recipient out;
        out.kind_ = Kind::ssh_ed25519;
        out.ssh_key_ = *wire;
        out.x25519_ = ed25519_to_x25519(std::span<const uint8_t, kKeySize>(key.data(), kKeySize));
        return out;
    }
    throw Error("not an age recipient (age1… or ssh-ed25519 …)");
}

std::string Recipient::to_string() const {
    if (kind_ == Kind::x25519) return bech32_encode(kRecipientHrp, x25519_, false);
    std::string b64 = base64_encode(ssh_key_);
    while (b64.size() % 4) b64 += '=';
    return std::string(kSshType) + ' ' + b64;
}

Stanza Recipient::wrap(const FileKey& file_key) const {
    Key32 ephemeral;
    random_bytes(ephemeral.span());
    Point share = x25519_base(ephemeral.span());
    Key32 shared = age::x25519(ephemeral.span(), x25519_);
    if (kind_ == Kind::x25519)
        return wrap_with(shared.span(), share, x25519_, kX25519Label, {"X25519", base64_encode(share)}, file_key);
    Key32 tweaked = age::x25519(ssh_tweak(ssh_key_).span(), shared.span());
    return wrap_with(tweaked.span(), share, x25519_, kSshEd25519Label,
                     {std::string(kSshType), ssh_tag(ssh_key_), base64_encode(share)}, file_key);
}

std::vector<Recipient> parse_recipients(std::string_view text, const std::string& name) {
    return parse_lines<Recipient>(text, name, "recipient");
}

std::vector<Recipient> read_recipients_file(const std::filesystem::path& file) {
    return parse_recipients(read_key_file(file, false, false), file.string());
}

// --- Identities -------------------------------------------------------------

Identity Identity::generate() {
    Identity id;
    random_bytes(id.secret_.span());
    id.x25519_ = x25519_base(id.secret_.span());
    return id;
}

Identity Identity::parse(std::string_view text) {
    auto b = bech32_decode(text);
    if (!b || b->hrp != kIdentityHrp)
        throw Error("not an age identity (AGE-SECRET-KEY-1…, upper case, valid checksum)");
    SecretBuffer data;
    data.bytes() = std::move(b->data);
    if (data.bytes().size() != kKeySize) throw Error("an AGE-SECRET-KEY-1… identity holds 32 bytes");
    Identity id;
    std::copy(data.bytes().begin(), data.bytes().end(), id.secret_.data());
    id.x25519_ = x25519_base(id.secret_.span());
    return id;
}

Identity Identity::parse_openssh(std::string_view pem) {
    // The armor (PROTOCOL.key in OpenSSH's sources): base64 lines between
    // the BEGIN and END lines.
    size_t begin = pem.find(kOpensshBegin), end = pem.find(kOpensshEnd);
    if (begin != 0 || end == std::string_view::npos)
        throw Error("not an OpenSSH private key (no BEGIN/END OPENSSH PRIVATE KEY lines)");
    std::string b64;
    for (char c : pem.substr(kOpensshBegin.size(), end - kOpensshBegin.size()))
        if (c != '\n' && c != '\r') b64.push_back(c);
    auto blob = base64_decode_padded(b64);
    if (!blob) throw Error("the OpenSSH private key is not valid base64");
    SecretBuffer raw;
    raw.bytes() = std::move(*blob);
    static constexpr char kMagic[] = "openssh-key-v1";  // with its NUL
    if (raw.bytes().size() < sizeof kMagic || std::memcmp(raw.bytes().data(), kMagic, sizeof kMagic) != 0)
        throw Error("not an openssh-key-v1 private key");
    WireReader r(std::span<const uint8_t>(raw.bytes()).subspan(sizeof kMagic), "the OpenSSH private key");
    std::string_view cipher = r.text(), kdf = r.text();
    r.bytes();  // kdf options
    if (cipher != "none" || kdf != "none")
        throw Error("the OpenSSH private key is protected by a passphrase, which is not supported: "
                    "use a key without one (ssh-keygen -N '') or an age identity");
    if (r.u32() != 1) throw Error("the OpenSSH private key file holds more than one key");
    auto public_part = r.bytes();
    Bytes public_wire(public_part.begin(), public_part.end());
    WireReader priv(r.bytes(), "the OpenSSH private key's private section");
    if (priv.u32() != priv.u32()) throw Error("the OpenSSH private key's check numbers differ");
    std::string_view type = priv.text();
    if (type != kSshType) throw Error("the OpenSSH private key is " + std::string(type) + ", not ssh-ed25519");
    auto pub = priv.bytes(), secret = priv.bytes();
    if (pub.size() != kKeySize || secret.size() != 2 * kKeySize)
        throw Error("the OpenSSH ssh-ed25519 private key has keys of the wrong size");
    std::span<const uint8_t, kKeySize> seed(secret.data(), kKeySize);
    Point derived = ed25519_public(seed);
    if (!equal_ct(derived, pub) || !equal_ct(pub, secret.subspan(kKeySize)))
        throw Error("the OpenSSH ssh-ed25519 private key does not match its public key");
    Identity id;
    id.kind_ = Kind::ssh_ed25519;
    id.ssh_key_ = ssh_wire_key(std::span<const uint8_t, kKeySize>(pub.data(), kKeySize));
    if (!public_wire.empty() && public_wire != id.ssh_key_)
        throw Error("the OpenSSH private key's public part does not match its private part");
    // age's conversion: the X25519 scalar is the first half of SHA-512(seed)
    // (the Ed25519 scalar before clamping, which X25519 applies).
    auto h = sha512(seed);
    std::copy_n(h.begin(), kKeySize, id.secret_.data());
    wipe(h.data(), h.size());
    id.x25519_ = ed25519_to_x25519(std::span<const uint8_t, kKeySize>(pub.data(), kKeySize));
    return id;
}

Recipient Identity::recipient() const {
    Recipient r;
    r.kind_ = kind_ == Kind::x25519 ? Recipient::Kind::x25519 : Recipient::Kind::ssh_ed25519;
    r.x25519_ = x25519_;
    r.ssh_key_ = ssh_key_;
    return r;
}

std::string Identity::to_string() const {
    if (kind_ != Kind::x25519) throw Error("only X25519 identities have an AGE-SECRET-KEY-1… form");
    return bech32_encode(kIdentityHrp, secret_.span(), true);
}

std::optional<FileKey> Identity::unwrap(const Stanza& s) const {
    if (s.args.empty()) return std::nullopt;
    if (kind_ == Kind::x25519) {
        if (s.args[0] != "X25519") return std::nullopt;
        if (s.args.size() != 2) throw Error("X25519 stanza: " + std::to_string(s.args.size() - 1) + " arguments, not 1");
        Point share = decode_share(s.args[1], "X25519");
        check_body(s, "X25519");
        Key32 shared = age::x25519(secret_.span(), share);
        return unwrap_with(shared.span(), share, x25519_, kX25519Label, s.body);
    }
    if (s.args[0] != kSshType) return std::nullopt;
    if (s.args.size() != 3)
        throw Error("ssh-ed25519 stanza: " + std::to_string(s.args.size() - 1) + " arguments, not 2");
    if (s.args[1] != ssh_tag(ssh_key_)) return std::nullopt;  // another SSH key's
    Point share = decode_share(s.args[2], "ssh-ed25519");
    check_body(s, "ssh-ed25519");
    Key32 shared = age::x25519(secret_.span(), share);
    Key32 tweaked = age::x25519(ssh_tweak(ssh_key_).span(), shared.span());
    return unwrap_with(tweaked.span(), share, x25519_, kSshEd25519Label, s.body);
}

std::vector<Identity> parse_identities(std::string_view text, const std::string& name) {
    std::vector<Identity> out;
    if (text.starts_with("-----BEGIN")) {
        try {
            out.push_back(Identity::parse_openssh(text));
        } catch (const Error& e) {
            throw Error(e.message(), name);
        }
        return out;
    }
    return parse_lines<Identity>(text, name, "identity");
}

std::vector<Identity> read_identities_file(const std::filesystem::path& file, bool allow_insecure) {
    struct Wiped {
        std::string text;
        ~Wiped() { wipe(text.data(), text.size()); }
    } key{read_key_file(file, true, allow_insecure)};
    return parse_identities(key.text, file.string());
}

}  // namespace xendump::age
