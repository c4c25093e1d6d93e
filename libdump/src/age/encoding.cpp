// Base64 and Bech32 for age (see encoding.hpp).
#include "age/encoding.hpp"

#include <array>

namespace xendump::age {
namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// BIP 173: the charset and the checksum polynomial.
constexpr char kBech32[] = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";

uint32_t bech32_polymod(std::span<const uint8_t> values) {
    static constexpr uint32_t gen[5] = {0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3};
    uint32_t chk = 1;
    for (uint8_t v : values) {
        uint32_t top = chk >> 25;
        chk = (chk & 0x1ffffff) << 5 ^ v;
        for (int i = 0; i < 5; ++i)
            if ((top >> i) & 1) chk ^= gen[i];
    }
    return chk;
}

Bytes hrp_expand(std::string_view hrp) {
    Bytes out;
    for (char c : hrp) out.push_back(static_cast<uint8_t>(c) >> 5);
    out.push_back(0);
    for (char c : hrp) out.push_back(static_cast<uint8_t>(c) & 31);
    return out;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
char upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

// Regroups bits: 8 to 5 (with padding) or 5 to 8 (padding must be zero and short).
std::optional<Bytes> convert_bits(std::span<const uint8_t> in, int from, int to, bool pad) {
    Bytes out;
    uint32_t acc = 0;
    int bits = 0;
    const uint32_t maxv = (1u << to) - 1;
    for (uint8_t v : in) {
        acc = acc << from | v;
        bits += from;
        while (bits >= to) {
            bits -= to;
            out.push_back(static_cast<uint8_t>(acc >> bits & maxv));
        }
    }
    if (pad) {
        if (bits) out.push_back(static_cast<uint8_t>(acc << (to - bits) & maxv));
    } else if (bits >= from || (acc << (to - bits) & maxv)) {
        return std::nullopt;
    }
    return out;
}

}  // namespace

std::string base64_encode(std::span<const uint8_t> data) {
    std::string out;
    out.reserve((data.size() * 4 + 2) / 3);
    size_t i = 0;
    for (; i + 3 <= data.size(); i += 3) {
        uint32_t v = uint32_t(data[i]) << 16 | uint32_t(data[i + 1]) << 8 | data[i + 2];
        for (int s = 18; s >= 0; s -= 6) out.push_back(kB64[v >> s & 63]);
    }
    if (data.size() - i == 1) {
        uint32_t v = uint32_t(data[i]) << 16;
        out.push_back(kB64[v >> 18 & 63]);
        out.push_back(kB64[v >> 12 & 63]);
    } else if (data.size() - i == 2) {
        uint32_t v = uint32_t(data[i]) << 16 | uint32_t(data[i + 1]) << 8;
        out.push_back(kB64[v >> 18 & 63]);
        out.push_back(kB64[v >> 12 & 63]);
        out.push_back(kB64[v >> 6 & 63]);
    }
    return out;
}

std::optional<Bytes> base64_decode_canonical(std::string_view text) {
    if (text.size() % 4 == 1) return std::nullopt;
    Bytes out;
    out.reserve(text.size() * 3 / 4);
    uint32_t acc = 0;
    int bits = 0;
    for (char c : text) {
        int v = b64_value(c);
        if (v < 0) return std::nullopt;
        acc = (acc << 6 | static_cast<uint32_t>(v)) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<uint8_t>(acc >> bits));
        }
    }
    // Canonical: the bits left over (2 or 4) are zero.
    if (bits && (acc & ((1u << bits) - 1))) return std::nullopt;
    return out;
}

std::optional<Bytes> base64_decode_padded(std::string_view text) {
    if (text.size() % 4) return std::nullopt;
    size_t pad = 0;
    while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
    return base64_decode_canonical(text.substr(0, text.size() - pad));
}

std::string bech32_encode(std::string_view hrp, std::span<const uint8_t> data, bool up) {
    std::string h;
    for (char c : hrp) h.push_back(lower(c));
    Bytes values = *convert_bits(data, 8, 5, true);
    Bytes check = hrp_expand(h);
    check.insert(check.end(), values.begin(), values.end());
    check.insert(check.end(), 6, 0);
    uint32_t mod = bech32_polymod(check) ^ 1;
    for (int i = 0; i < 6; ++i) values.push_back(static_cast<uint8_t>(mod >> (5 * (5 - i)) & 31));
    std::string out = h + '1';
    for (uint8_t v : values) out.push_back(kBech32[v]);
    wipe(values.data(), values.size());
    wipe(check.data(), check.size());
    if (up)
        for (char& c : out) c = upper(c);
    return out;
}

std::optional<Bech32> bech32_decode(std::string_view text) {
    bool has_lower = false, has_upper = false;
    for (char c : text) {
        if (c < 33 || c > 126) return std::nullopt;
        has_lower |= c >= 'a' && c <= 'z';
        has_upper |= c >= 'A' && c <= 'Z';
    }
    if (has_lower && has_upper) return std::nullopt;
    size_t sep = text.rfind('1');
    if (sep == std::string_view::npos || sep == 0 || text.size() - sep < 7) return std::nullopt;
    std::string hrp;
    for (char c : text.substr(0, sep)) hrp.push_back(lower(c));
    Bytes values;
    for (char c : text.substr(sep + 1)) {
        const char* p = std::char_traits<char>::find(kBech32, 32, lower(c));
        if (!p) return std::nullopt;
        values.push_back(static_cast<uint8_t>(p - kBech32));
    }
    Bytes check = hrp_expand(hrp);
    check.insert(check.end(), values.begin(), values.end());
    // The groups are an identity's secret for AGE-SECRET-KEY-1…: wiped.
    struct Wipe {
        Bytes& a;
        Bytes& b;
        ~Wipe() {
            wipe(a.data(), a.size());
            wipe(b.data(), b.size());
        }
    } wiped{values, check};
    if (bech32_polymod(check) != 1) return std::nullopt;
    auto data = convert_bits(std::span<const uint8_t>(values).first(values.size() - 6), 5, 8, false);
    if (!data) return std::nullopt;
    return Bech32{std::string(text.substr(0, sep)), std::move(*data)};
}

}  // namespace xendump::age
