#include "recipients.hpp"

#include "xendump/error.hpp"
#include "xendump/recipients.hpp"

namespace xendump::cli {

std::vector<std::string> recipients_choice(const Parsed& p) {
    std::vector<std::string> out;
    const std::vector<std::string> given = p.values("--recipient");
    for (size_t i = 0; i < given.size(); ++i) {
        try {
            out.push_back(parse_recipient(given[i]));
        } catch (const Error& e) {
            throw UsageError{"-r #" + std::to_string(i + 1) + ": " + e.message()};
        }
    }
    for (const std::string& file : p.values("--recipients-file")) {
        try {
            for (std::string& r : read_recipients_file(file)) out.push_back(std::move(r));
        } catch (const Error& e) {
            throw UsageError{"-R: " + std::string(e.what())};
        }
    }
    return out;
}

}  // namespace xendump::cli
