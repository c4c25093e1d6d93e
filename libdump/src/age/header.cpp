// The age v1 header (C2SP age, "Header"): the version line, recipient
// stanzas with their base64 bodies wrapped at 64 columns, and the MAC line.
#include <fcntl.h>
#include <sys/stat.h>

#include "age/age.hpp"
#include "io/random_access.hpp"
#include "age/encoding.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::age {
namespace {

constexpr std::string_view kVersionLine = "age-encryption.org/v1";
constexpr size_t kColumns = 64;  // base64 characters in a full body line
constexpr size_t kMacBase64 = 43;  // 32 bytes, unpadded

bool arg_char(char c) { return c >= 0x21 && c <= 0x7e; }

// A line of the header that ends with '\n' at `pos`, or nullopt.
std::optional<std::string_view> line_at(std::span<const uint8_t> data, size_t pos) {
    const char* begin = reinterpret_cast<const char*>(data.data());
    std::string_view rest(begin + pos, data.size() - pos);
    size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) return std::nullopt;
    return rest.substr(0, nl);
}

}  // namespace

Header parse_header(std::span<const uint8_t> data, const std::string& name) {
    if (data.size() > kMaxHeaderSize) data = data.first(kMaxHeaderSize);
    auto fail = [&](size_t offset, const std::string& what) { return Error("age header: " + what, name, offset); };
    size_t pos = 0;
    auto next_line = [&]() {
        auto line = line_at(data, pos);
        if (!line) {
            throw fail(pos, data.size() >= kMaxHeaderSize
                                ? "no MAC line (\"--- …\") in the first " + std::to_string(kMaxHeaderSize >> 20) + " MiB"
                                : "the file ends before the header's MAC line (\"--- …\")");
        }
        pos += line->size() + 1;
        return *line;
    };
    std::string_view version = next_line();
    if (version != kVersionLine) {
        if (version.starts_with("age-encryption.org/") && !version.ends_with("\r"))
            throw fail(0, "unsupported version \"" + std::string(version.substr(0, 40)) + "\" (only v1)");
        throw fail(0, "not an age file (its first line is not \"age-encryption.org/v1\")");
    }
    Header h;
    for (;;) {
        const size_t line_off = pos;
        std::string_view line = next_line();
        if (line.starts_with("---")) {
            // "--- " and the canonical base64 of the 32-byte HMAC, nothing else.
            auto mac = line.size() == 4 + kMacBase64 && line[3] == ' '
                           ? base64_decode_canonical(line.substr(4))
                           : std::nullopt;
            if (!mac || mac->size() != h.mac.size())
                throw fail(line_off, "the MAC line is not \"--- \" and 43 characters of canonical base64");
            std::copy(mac->begin(), mac->end(), h.mac.begin());
            h.mac_input_size = line_off + 3;
            h.size = pos;
            return h;
        }
        if (!line.starts_with("-> "))
            throw fail(line_off, "a line that is neither a stanza (\"-> …\") nor the MAC (\"--- …\")");
        Stanza s;
        s.offset = line_off;
        std::string_view args = line.substr(3);
        for (;;) {
            size_t sp = args.find(' ');
            std::string_view arg = args.substr(0, sp);
            if (arg.empty()) throw fail(line_off, "a stanza with an empty argument");
            for (char c : arg)
                if (!arg_char(c)) throw fail(line_off, "a stanza argument with a character outside ASCII 0x21-0x7e");
            s.args.emplace_back(arg);
            if (sp == std::string_view::npos) break;
            args = args.substr(sp + 1);
        }
        // The body: full lines of 64 columns, then one shorter line (maybe empty).
        std::string body;
        for (;;) {
            const size_t body_off = pos;
            std::string_view b = next_line();
            if (b.size() > kColumns) throw fail(body_off, "a stanza body line longer than 64 columns");
            body += b;
            if (b.size() < kColumns) break;
        }
        auto decoded = base64_decode_canonical(body);
        if (!decoded) throw fail(line_off, "the body of stanza \"" + s.args[0] + "\" is not canonical base64");
        s.body = std::move(*decoded);
        h.stanzas.push_back(std::move(s));
    }
}

Bytes encode_header(const std::vector<Stanza>& stanzas, const FileKey& file_key) {
    std::string text(kVersionLine);
    text += '\n';
    for (const Stanza& s : stanzas) {
        text += "->";
        for (const std::string& a : s.args) text += ' ' + a;
        text += '\n';
        std::string b64 = base64_encode(s.body);
        // Every full line, then the short final line (empty when the body
        // fills whole lines), each ending in '\n'.
        for (size_t i = 0;; i += kColumns) {
            text += b64.substr(i, kColumns);
            text += '\n';
            if (b64.size() - i < kColumns) break;
        }
    }
    text += "---";
    Key32 mac_key;
    hkdf_sha256(file_key.span(), {}, "header", mac_key.span());
    auto mac = hmac_sha256(mac_key.span(), std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
    text += ' ' + base64_encode(mac) + '\n';
    return Bytes(text.begin(), text.end());
}

std::unique_ptr<io::RandomAccess> regular_file(int fd, const std::string& name) {
    struct stat st{};
    if (::fstat(fd, &st) != 0) throw_errno("cannot stat", name);
    // Chunks are read where they lie (pread): a pipe cannot be read so.
    if (!S_ISREG(st.st_mode))
        throw Error(std::string("is ") + util::file_kind(st.st_mode) + ": an age file is read with random access, from a regular file",
                    name);
    return std::make_unique<io::FdRandomAccess>(fd, static_cast<uint64_t>(st.st_size), name);
}

FileHeader read_header(int fd, const std::string& name) { return read_header(*regular_file(fd, name)); }

FileHeader read_header(const io::RandomAccess& in) {
    FileHeader out;
    out.file_size = in.size();
    // Read a little, then more while no line "---…" ends in what was read:
    // the header is small, and a hostile one stops at kMaxHeaderSize.
    size_t want = 4096, scanned = 0;
    for (;;) {
        size_t had = out.bytes.size();
        want = std::min<uint64_t>(std::min(want, kMaxHeaderSize), out.file_size);
        out.bytes.resize(want);
        const size_t n = in.read_at(had, std::as_writable_bytes(std::span(out.bytes).subspan(had)));
        out.bytes.resize(had + n);
        bool found = false;
        while (auto line = line_at(out.bytes, scanned)) {
            if (line->starts_with("---")) {
                found = true;
                break;
            }
            scanned += line->size() + 1;
        }
        if (found || out.bytes.size() < want || want >= std::min<uint64_t>(kMaxHeaderSize, out.file_size)) break;
        want *= 2;
    }
    out.header = parse_header(out.bytes, in.name());
    out.bytes.resize(out.header.size);
    return out;
}

}  // namespace xendump::age
