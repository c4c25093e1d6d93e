#include "crash_signature.hpp"

#include <openssl/evp.h>

#include <cctype>
#include <cstdio>
#include <stdexcept>

namespace xendump::daemon {

namespace {

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// The panic line as it reads on every host: no "[  8.197049] " time, each
// number ("0x…", decimal, or a hex word of 8 digits and more: an address)
// one '#', runs of blanks one space. Words that hold digits inside a name
// (ext4, x86_64, sda1) keep them: only whole words are numbers.
std::string normalised_panic(std::string_view line) {
    line = without_log_time(line);
    size_t at = 0;
    std::string out;
    while (at < line.size()) {
        const char c = line[at];
        const bool starts_word = at == 0 || !is_word(line[at - 1]);
        if (starts_word && is_word(c)) {
            size_t end = at;
            while (end < line.size() && is_word(line[end])) ++end;
            const std::string_view word = line.substr(at, end - at);
            bool decimal = true, hex = word.size() >= 8;
            for (char w : word) {
                decimal = decimal && is_digit(w);
                hex = hex && is_hex(w);
            }
            const bool prefixed = word.size() > 2 && word[0] == '0' && (word[1] == 'x' || word[1] == 'X') &&
                                  [&] {
                                      for (size_t i = 2; i < word.size(); ++i)
                                          if (!is_hex(word[i])) return false;
                                      return true;
                                  }();
            out += decimal || hex || prefixed ? std::string_view("#") : word;
            at = end;
            continue;
        }
        if (c == ' ' || c == '\t') {
            if (!out.empty() && out.back() != ' ') out += ' ';
        } else {
            out += c;
        }
        ++at;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

// "name+0x1a/0x40" or "name.cold+0x44" -> "name" / "name.cold"; "" for an
// unreliable frame ("? name+…") or one without a name.
std::string function_of(const std::string& frame) {
    if (frame.rfind("? ", 0) == 0) return "";
    const size_t plus = frame.find('+');
    std::string name = frame.substr(0, plus);
    if (name.empty() || name.rfind("0x", 0) == 0) return "";
    return name;
}

}  // namespace

std::string crash_signature_text(const std::optional<std::string>& panic,
                                 const std::optional<GuestBacktrace>& backtrace) {
    if (!panic || panic->empty()) return "";
    std::string text = normalised_panic(*panic) + "\n";
    if (backtrace) {
        size_t kept = 0;
        for (const auto& frame : backtrace->frames) {
            if (kept == kSignatureFrames) break;
            const std::string name = function_of(frame);
            if (name.empty()) continue;
            text += name + "\n";
            ++kept;
        }
    }
    return text;
}

std::optional<std::string> crash_signature(const std::optional<std::string>& panic,
                                           const std::optional<GuestBacktrace>& backtrace) {
    const std::string text = crash_signature_text(panic, backtrace);
    if (text.empty()) return std::nullopt;
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr) != 1 || size < 8)
        throw std::runtime_error("SHA-256 failed");
    char hex[17];
    for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return std::string(hex, 16);
}

std::optional<std::string> crash_signature(const Sidecar& s) {
    return crash_signature(s.guest_panic, s.guest_backtrace);
}

}  // namespace xendump::daemon
