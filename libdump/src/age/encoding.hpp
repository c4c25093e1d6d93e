// The text encodings of age v1: base64 (RFC 4648, standard alphabet) without
// padding and canonical, as the header uses it; with padding, as OpenSSH keys
// use it; and Bech32 (BIP 173) for age1… recipients and AGE-SECRET-KEY-1…
// identities.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "age/crypto.hpp"

namespace xendump::age {

// Base64 without padding.
std::string base64_encode(std::span<const uint8_t> data);
// Decodes base64 without padding; nullopt unless `text` is canonical: only
// the standard alphabet, no '=', no length of 1 mod 4, zero unused bits.
std::optional<Bytes> base64_decode_canonical(std::string_view text);
// Decodes padded base64 (OpenSSH's); nullopt when it is not exactly that.
std::optional<Bytes> base64_decode_padded(std::string_view text);

// Bech32 of `data` under `hrp`, in lower case (upper case when `upper`).
std::string bech32_encode(std::string_view hrp, std::span<const uint8_t> data, bool upper);
struct Bech32 {
    std::string hrp;  // as written (all upper or all lower case)
    Bytes data;
};
// nullopt when `text` is not valid Bech32 (mixed case, bad checksum,
// characters, padding). No length limit: age's strings are longer than 90.
std::optional<Bech32> bech32_decode(std::string_view text);

}  // namespace xendump::age
