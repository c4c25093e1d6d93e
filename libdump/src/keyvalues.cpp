#include "xendump/keyvalues.hpp"

#include "xendump/error.hpp"

namespace xendump {

void KeyValues::set(std::string key, std::string value) {
    if (key.empty() || key.find_first_of("=\n") != std::string::npos)
        throw Error("invalid NT_XEN_DOMAIN key '" + key + "'");
    if (value.find('\n') != std::string::npos)
        throw Error("NT_XEN_DOMAIN value of " + key + " contains a newline");
    for (auto& [k, v] : items_) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    items_.emplace_back(std::move(key), std::move(value));
}

std::optional<std::string> KeyValues::get(std::string_view key) const {
    for (const auto& [k, v] : items_)
        if (k == key) return v;
    return std::nullopt;
}

std::string KeyValues::serialize() const {
    std::string out;
    for (const auto& [k, v] : items_) {
        out += k;
        out += '=';
        out += v;
        out += '\n';
    }
    return out;
}

KeyValues KeyValues::parse(std::string_view text) {
    while (!text.empty() && text.back() == '\0') text.remove_suffix(1);
    KeyValues kv;
    while (!text.empty()) {
        size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        size_t eq = line.find('=');
        if (eq == 0 || eq == std::string_view::npos) continue;
        std::string key(line.substr(0, eq));
        if (kv.contains(key)) continue;  // first wins
        kv.items_.emplace_back(std::move(key), std::string(line.substr(eq + 1)));
    }
    return kv;
}

}  // namespace xendump
