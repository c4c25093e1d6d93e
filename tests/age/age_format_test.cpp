// The age format (libdump/src/age): round trips through the streaming writer
// and the random-access reader, chunks sealed out of order, keys and key
// files, and every bad input with the error it must give (file, chunk, offset).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>

#include "age_helpers.hpp"

namespace xendump::age {
namespace {

using namespace xendump::age::test;
using xendump::test::TempDir;

// Runs `f`, which must throw Error whose text holds every one of `parts`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
    try {
        f();
        ADD_FAILURE() << "no error; expected one saying: " << *parts.begin();
    } catch (const Error& e) {
        for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\n  lacks: " << p;
    }
}

std::string hex_offset(uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "at offset 0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

struct Fixture : ::testing::Test {
    TempDir dir;
    Identity id = Identity::generate();
    std::vector<Identity> ids{id};
    std::vector<Recipient> rcpt{id.recipient()};
    std::filesystem::path file = dir / "f.age";

    // Encrypts `n` random bytes to `file`; returns the plaintext.
    Bytes make(size_t n) {
        Bytes plain = random_plaintext(n, static_cast<uint32_t>(n));
        write_file(file, encrypt(rcpt, plain));
        return plain;
    }
    // A Decryptor of `file` (kept open by the fixture).
    Decryptor open() {
        fd = UniqueFd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
        return Decryptor(fd.get(), file.string(), ids);
    }
    UniqueFd fd;
};

// --- Round trips ------------------------------------------------------------

TEST_F(Fixture, RoundTripsEverySizeAroundTheChunkSize) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{65535}, size_t{65536}, size_t{65537}, size_t{3 * 1048576 + 12345}}) {
        SCOPED_TRACE(n);
        Bytes plain = make(n);
        UniqueFd f(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
        Decryptor d(f.get(), file.string(), ids);
        EXPECT_EQ(d.size(), n);
        EXPECT_EQ(d.chunks(), n == 0 ? 1 : (n + kChunkSize - 1) / kChunkSize);
        EXPECT_EQ(std::filesystem::file_size(file), d.payload_offset() + n + d.chunks() * kTagSize);
        Bytes back(n);
        EXPECT_EQ(d.read(0, back), n);
        EXPECT_TRUE(back == plain);
        // Random access: pieces across chunk boundaries, in a scattered order.
        for (uint64_t off : {n / 2, n > 65540 ? uint64_t{65530} : 0, n > 3 ? n - 3 : 0}) {
            Bytes piece(std::min<uint64_t>(20, n - off));
            ASSERT_EQ(d.read(off, piece), piece.size());
            EXPECT_TRUE(std::equal(piece.begin(), piece.end(), plain.begin() + static_cast<long>(off)));
        }
        Bytes past(4);
        EXPECT_EQ(d.read(n, past), 0u);
    }
}

TEST_F(Fixture, ChunksSealedInAnyOrderMakeTheSameFile) {
    // A writer that patches its head seals chunk 0 last: here, last to first.
    Bytes plain = random_plaintext(3 * kChunkSize + 100, 3);
    Encryptor enc(rcpt);
    Bytes out(enc.file_size(plain.size()));
    std::copy(enc.head().begin(), enc.head().end(), out.begin());
    for (uint64_t i = 4; i-- > 0;) {
        bool last = i == 3;
        auto p = std::span<const uint8_t>(plain).subspan(i * kChunkSize, last ? 100 : kChunkSize);
        EXPECT_FALSE(enc.complete());
        enc.seal(i, p, last, std::span(out).subspan(enc.chunk_offset(i), p.size() + kTagSize));
    }
    EXPECT_TRUE(enc.complete());
    write_file(file, out);
    EXPECT_TRUE(decrypt_file(file, ids) == plain);
}

// A chunk gathered from the pages where they lie (io::EncryptingOutput):
// pieces of any size, empty ones among them, seal to what the whole would.
TEST_F(Fixture, ChunksSealedFromPiecesDecryptAsTheWhole) {
    Bytes plain = random_plaintext(2 * kChunkSize + 5000, 4);
    Encryptor enc(rcpt);
    Bytes out(enc.file_size(plain.size()));
    std::copy(enc.head().begin(), enc.head().end(), out.begin());
    const std::vector<std::vector<size_t>> cuts{{1, 63, 0, 64, 4095, 17, 4096}, {kChunkSize}, {4999, 1}};
    for (uint64_t i = 0; i < 3; ++i) {
        const bool last = i == 2;
        auto whole = std::span<const uint8_t>(plain).subspan(i * kChunkSize, last ? 5000 : kChunkSize);
        std::vector<std::span<const uint8_t>> pieces;
        size_t at = 0;
        for (size_t n : cuts[i]) {
            pieces.push_back(whole.subspan(at, n));
            at += n;
        }
        pieces.push_back(whole.subspan(at));  // the rest
        enc.seal(i, pieces, last, std::span(out).subspan(enc.chunk_offset(i), whole.size() + kTagSize));
    }
    write_file(file, out);
    EXPECT_TRUE(decrypt_file(file, ids) == plain);
}

TEST_F(Fixture, EncryptorRefusesToSealAChunkTwiceOrAfterTheLast) {
    Encryptor enc(rcpt);
    Bytes full(kChunkSize), out(kChunkSize + kTagSize), small(10), small_out(10 + kTagSize);
    enc.seal(0, full, false, out);
    expect_error([&] { enc.seal(0, full, false, out); }, {"chunk 0 was already sealed"});
    expect_error([&] { enc.seal(1, small, false, small_out); }, {"chunk 1 has 10 bytes"});
    enc.seal(2, small, true, small_out);
    expect_error([&] { enc.seal(3, full, false, out); }, {"chunk 3 comes after the last chunk, chunk 2"});
    expect_error([&] { enc.seal(1, small, true, small_out); }, {"chunk 1 sealed as the last chunk, but chunk 2 was"});
    Bytes none, none_out(kTagSize);
    expect_error([&] { enc.seal(1, none, true, none_out); }, {"the last chunk may be empty only when it is the only one"});
    EXPECT_FALSE(enc.complete());  // chunk 1 is missing
    expect_error([] { Encryptor e({}); }, {"no recipient"});
}

TEST_F(Fixture, SeveralRecipientsEachDecrypt) {
    Identity other = Identity::generate();
    rcpt.push_back(other.recipient());
    Bytes plain = make(1000);
    EXPECT_TRUE(decrypt_file(file, std::vector<Identity>{other}) == plain);
    EXPECT_TRUE(decrypt_file(file, ids) == plain);
}

// --- Keys ---------------------------------------------------------------------

TEST(Keys, TextFormsRoundTrip) {
    Identity id = Identity::generate();
    std::string secret = id.to_string();
    EXPECT_TRUE(secret.starts_with("AGE-SECRET-KEY-1"));
    EXPECT_EQ(secret.size(), 74u);
    Identity back = Identity::parse(secret);
    EXPECT_EQ(back.recipient().to_string(), id.recipient().to_string());
    std::string pub = id.recipient().to_string();
    EXPECT_TRUE(pub.starts_with("age1"));
    EXPECT_EQ(pub.size(), 62u);
    EXPECT_EQ(Recipient::parse(pub).to_string(), pub);
}

TEST(Keys, BadStringsAreRefused) {
    std::string pub = Identity::generate().recipient().to_string();
    std::string flipped = pub;
    flipped[10] = flipped[10] == 'q' ? 'p' : 'q';
    expect_error([&] { Recipient::parse(flipped); }, {"not a valid age1… recipient"});
    std::string mixed = pub;
    mixed[5] = static_cast<char>(std::toupper(mixed[5]));
    if (mixed != pub) expect_error([&] { Recipient::parse(mixed); }, {"not a valid age1… recipient"});
    expect_error([&] { Recipient::parse("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ== x"); }, {"ssh-rsa recipients are not supported"});
    expect_error([&] { Recipient::parse("hello"); }, {"not an age recipient"});
    std::string secret = Identity::generate().to_string();
    std::string lower = secret;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) { return std::tolower(c); });
    expect_error([&] { Identity::parse(lower); }, {"not an age identity"});
    expect_error([&] { Identity::parse(pub); }, {"not an age identity"});
}

TEST(Keys, RecipientsFilesNameTheLine) {
    TempDir dir;
    std::string a = Identity::generate().recipient().to_string(), b = Identity::generate().recipient().to_string();
    write_text(dir / "r", "# team keys\n" + a + "\n\n" + b + "\n");
    EXPECT_EQ(read_recipients_file(dir / "r").size(), 2u);
    write_text(dir / "bad", "# keys\n" + a + "\nage1notakey\n");
    expect_error([&] { read_recipients_file(dir / "bad"); }, {(dir / "bad").string() + ":3: ", "not a valid age1"});
    write_text(dir / "empty", "# nothing\n\n");
    expect_error([&] { read_recipients_file(dir / "empty"); }, {"holds no recipient"});
    expect_error([&] { read_recipients_file(dir / "missing"); }, {"cannot open", "No such file"});
}

TEST(Keys, IdentityFilesReadableByOthersAreRefusedUnlessAllowed) {
    TempDir dir;
    Identity id = Identity::generate();
    std::string text = "# created: now\n# public key: " + id.recipient().to_string() + "\n" + id.to_string() + "\n";
    write_text(dir / "k", text, 0600);
    EXPECT_EQ(read_identities_file(dir / "k", false).size(), 1u);
    write_text(dir / "open", text, 0644);
    expect_error([&] { read_identities_file(dir / "open", false); },
                 {(dir / "open").string(), "may be read by group or others (mode 0644)", "--allow-insecure-identity"});
    write_text(dir / "group", text, 0640);
    expect_error([&] { read_identities_file(dir / "group", false); }, {"(mode 0640)"});
    EXPECT_EQ(read_identities_file(dir / "open", true).size(), 1u);
    write_text(dir / "bad", text + "AGE-SECRET-KEY-1XYZ\n", 0600);
    expect_error([&] { read_identities_file(dir / "bad", false); }, {(dir / "bad").string() + ":4: ", "not an age identity"});
}

// --- Bad input ------------------------------------------------------------------

TEST_F(Fixture, WrongIdentityMatchesNoStanza) {
    make(100);
    ids = {Identity::generate()};
    expect_error([&] { open(); }, {file.string(), "no identity matches", "1 recipient(s) (X25519)"});
}

TEST_F(Fixture, TamperedHeaderFailsItsMac) {
    // Two recipients; the second one's stanza altered: the first identity
    // still unwraps the file key, and the MAC must catch the change.
    Identity other = Identity::generate();
    rcpt.push_back(other.recipient());
    make(100);
    Bytes data = read_file(file);
    auto hdr = parse_header(data, "x");
    size_t body = hdr.stanzas[1].offset + std::string_view(reinterpret_cast<const char*>(data.data()) + hdr.stanzas[1].offset).find('\n') + 1;
    data[body] = data[body] == 'A' ? 'B' : 'A';
    write_file(file, data);
    expect_error([&] { open(); }, {file.string(), "the header MAC does not match", hex_offset(hdr.mac_input_size - 3)});
    // The MAC itself altered.
    data = read_file(file);
    data[body] = data[body] == 'A' ? 'B' : 'A';
    data[hdr.mac_input_size + 5] ^= 0x01;
    write_file(file, data);
    expect_error([&] { open(); }, {"age header:"});
}

TEST_F(Fixture, FlippedByteInAnyChunkNamesTheChunkAndOffset) {
    make(3 * kChunkSize + 500);
    const Bytes good = read_file(file);
    size_t head = open().payload_offset();
    for (uint64_t i = 0; i < 4; ++i) {
        SCOPED_TRACE(i);
        Bytes data = good;
        uint64_t off = head + i * kSealedChunkSize;
        data[off + 77] ^= 0x40;
        write_file(file, data);
        if (i == 3) {  // the last chunk is checked at open
            expect_error([&] { open(); }, {file.string(), hex_offset(off), "chunk 3, the last (516 bytes), does not authenticate"});
            continue;
        }
        Decryptor d = open();
        Bytes out(10);
        expect_error([&] { d.read(i * kChunkSize + 5, out); }, {file.string(), hex_offset(off), "chunk " + std::to_string(i) + " does not authenticate: its bytes were altered"});
        // The other chunks still read.
        EXPECT_EQ(d.read(((i + 1) % 3) * kChunkSize, out), 10u);
    }
}

TEST_F(Fixture, TruncatedFileAtAndOffAChunkBoundary) {
    make(3 * kChunkSize + 500);
    const Bytes good = read_file(file);
    size_t head = open().payload_offset();
    // At a boundary: the file now ends after chunk 1, which is not sealed as the last.
    write_file(file, std::span(good).first(head + 2 * kSealedChunkSize));
    expect_error([&] { open(); }, {file.string(), hex_offset(head + kSealedChunkSize), "chunk 1, the last in the file, is not sealed as the last chunk: the file is truncated at a chunk boundary"});
    // Off a boundary, inside chunk 2.
    write_file(file, std::span(good).first(head + 2 * kSealedChunkSize + 1000));
    expect_error([&] { open(); }, {hex_offset(head + 2 * kSealedChunkSize), "chunk 2, the last (1000 bytes), does not authenticate: the file is truncated inside a chunk"});
    // Shorter than a tag, and no chunk at all, and inside the nonce.
    write_file(file, std::span(good).first(head + 2 * kSealedChunkSize + 5));
    expect_error([&] { open(); }, {"chunk 2, the last, is 5 bytes, shorter than its 16-byte tag"});
    write_file(file, std::span(good).first(head));
    expect_error([&] { open(); }, {"no chunk after the nonce", hex_offset(head)});
    write_file(file, std::span(good).first(head - 3));
    expect_error([&] { open(); }, {"ends inside the 16-byte payload nonce"});
    write_file(file, std::span(good).first(30));
    expect_error([&] { open(); }, {"age header: the file ends before the header's MAC line", file.string()});
}

TEST_F(Fixture, ReorderedAndDuplicatedChunksAreNamed) {
    make(3 * kChunkSize + 500);
    const Bytes good = read_file(file);
    size_t head = open().payload_offset();
    auto chunk_at = [&](Bytes& d, int i) { return d.begin() + static_cast<long>(head + i * kSealedChunkSize); };
    Bytes swapped = good;
    std::swap_ranges(chunk_at(swapped, 0), chunk_at(swapped, 1), chunk_at(swapped, 1));
    write_file(file, swapped);
    {
        Decryptor d = open();
        expect_error([&] { d.chunk(0); }, {hex_offset(head), "chunk 0 holds chunk 1: chunks were reordered or duplicated"});
        expect_error([&] { d.chunk(1); }, {hex_offset(head + kSealedChunkSize), "chunk 1 holds chunk 0"});
        EXPECT_EQ(d.chunk(2).bytes().size(), kChunkSize);
    }
    Bytes dup = good;
    std::copy(chunk_at(dup, 0), chunk_at(dup, 1), chunk_at(dup, 2));
    write_file(file, dup);
    Decryptor d = open();
    expect_error([&] { d.chunk(2); }, {hex_offset(head + 2 * kSealedChunkSize), "chunk 2 holds chunk 0"});
    expect_error([&] { d.chunk(4); }, {"chunk 4 is past the end (4 chunks)"});
}

TEST_F(Fixture, APipeIsRefusedForRandomAccess) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    UniqueFd r(p[0]), w(p[1]);
    expect_error([&] { Decryptor d(r.get(), "pipe", ids); }, {"pipe: is a FIFO", "read with random access"});
}

TEST_F(Fixture, AppendedBytesAreNamed) {
    make(kChunkSize);  // one full chunk, sealed as the last
    Bytes data = read_file(file);
    size_t head = open().payload_offset();
    data.resize(data.size() + 100, 0x55);
    write_file(file, data);
    expect_error([&] { open(); }, {hex_offset(head), "chunk 0 is sealed as the last chunk, but 100 bytes follow it: bytes were appended"});
}

TEST_F(Fixture, EmptyLastChunkOnlyForAnEmptyFile) {
    // Hand-made: a full first chunk, then an empty last one (spec: the last
    // chunk may be empty only when the whole payload is empty).
    FileKey key;
    random_bytes(key.span());
    std::vector<Stanza> st{rcpt[0].wrap(key)};
    Bytes full = random_plaintext(kChunkSize, 1);
    write_file(file, hand_made(st, key, {{full, false}, {{}, true}}));
    expect_error([&] { open(); }, {"chunk 1, the last, is empty, which only the first chunk of an empty file may be"});
    write_file(file, hand_made(st, key, {{{}, true}}));
    EXPECT_EQ(open().size(), 0u);
    // Two chunks flagged last.
    write_file(file, hand_made(st, key, {{full, true}, {full, true}}));
    {
        Decryptor d = open();
        expect_error([&] { d.chunk(0); }, {"chunk 0 is sealed as the last chunk, but"});
    }
    // An unknown stanza (another recipient type) is passed over.
    st.insert(st.begin(), Stanza{{"example.com/grease", "x"}, Bytes(5, 1)});
    write_file(file, hand_made(st, key, {{full, true}}));
    EXPECT_EQ(open().size(), kChunkSize);
}

TEST(Header, MalformedHeadersNameTheOffset) {
    FileKey key;
    random_bytes(key.span());
    Recipient r = Identity::generate().recipient();
    Bytes good = encode_header({r.wrap(key)}, key);
    std::string g(good.begin(), good.end());
    auto parse = [](const std::string& s) {
        Bytes b(s.begin(), s.end());
        parse_header(b, "h.age");
    };
    parse(g);
    expect_error([&] { parse("hello\n"); }, {"h.age", "not an age file"});
    expect_error([&] { parse("age-encryption.org/v2\n--- x\n"); }, {"unsupported version"});
    expect_error([&] { parse(g.substr(0, g.size() - 1)); }, {"ends before the header's MAC line"});
    size_t nl = g.find('\n') + 1;
    expect_error([&] { parse(g.substr(0, nl) + "->  X\n\n" + g.substr(nl)); }, {hex_offset(nl), "a stanza with an empty argument"});
    expect_error([&] { parse(g.substr(0, nl) + "-> a\n" + std::string(65, 'A') + "\n" + g.substr(nl)); },
                 {hex_offset(nl + 5), "longer than 64 columns"});
    expect_error([&] { parse(g.substr(0, nl) + "-> a\nAB=\n" + g.substr(nl)); }, {"not canonical base64"});
    expect_error([&] { parse(g.substr(0, nl) + "junk\n" + g.substr(nl)); }, {hex_offset(nl), "neither a stanza"});
    std::string bad_mac = g;
    bad_mac.insert(bad_mac.size() - 1, "A");
    expect_error([&] { parse(bad_mac); }, {"the MAC line is not"});
}

}  // namespace
}  // namespace xendump::age
