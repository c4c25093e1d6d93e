// xendump/recipients.hpp: the public face of age::Recipient and age::StreamWriter (age/age.hpp).
#include "xendump/recipients.hpp"

#include <functional>

#include "age/age.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump {

std::string parse_recipient(std::string_view text) { return age::Recipient::parse(text).to_string(); }

std::vector<std::string> read_recipients_file(const std::filesystem::path& file) {
    std::vector<std::string> out;
    for (const age::Recipient& r : age::read_recipients_file(file)) out.push_back(r.to_string());
    return out;
}

namespace {

// The sealed bytes to `fd`. Outside AgeWriter (whose members are exported):
// the function object stays inside the library (tests/abi).
std::function<void(std::span<const uint8_t>)> write_to(int fd, const std::string* name) {
    return [fd, name](std::span<const uint8_t> b) { util::write_all(fd, b.data(), b.size(), *name); };
}

}  // namespace

struct AgeWriter::Impl {
    Impl(int fd, std::string name, const std::vector<std::string>& texts)
        : name(std::move(name)), recipients(parse(texts, this->name)), stream(recipients, write_to(fd, &this->name)) {}
    static std::vector<age::Recipient> parse(const std::vector<std::string>& texts, const std::string& name) {
        if (texts.empty()) throw Error("no recipient to encrypt to", name);
        return age::parse_recipient_list(texts);
    }
    std::string name;
    std::vector<age::Recipient> recipients;
    age::StreamWriter stream;
};

AgeWriter::AgeWriter(int fd, std::string name, const std::vector<std::string>& recipients)
    : impl_(std::make_unique<Impl>(fd, std::move(name), recipients)) {}
AgeWriter::~AgeWriter() = default;

void AgeWriter::write(std::span<const std::byte> data) {
    impl_->stream.write({reinterpret_cast<const uint8_t*>(data.data()), data.size()});
}

void AgeWriter::finish() { impl_->stream.finish(); }

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
