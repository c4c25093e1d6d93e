// xendump/recipients.hpp: the public face of age::Recipient (age/age.hpp).
#include "xendump/recipients.hpp"

#include "age/age.hpp"

namespace xendump {

std::string parse_recipient(std::string_view text) { return age::Recipient::parse(text).to_string(); }

std::vector<std::string> read_recipients_file(const std::filesystem::path& file) {
    std::vector<std::string> out;
    for (const age::Recipient& r : age::read_recipients_file(file)) out.push_back(r.to_string());
    return out;
}

namespace age {

std::vector<Recipient> parse_recipient_list(const std::vector<std::string>& texts) {
    std::vector<Recipient> out;
    out.reserve(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
        try {
            out.push_back(Recipient::parse(texts[i]));
        } catch (const Error& e) {
            throw Error("recipient " + std::to_string(i + 1) + " of " + std::to_string(texts.size()) + ": " + e.message());
        }
    }
    return out;
}

}  // namespace age

}  // namespace xendump
