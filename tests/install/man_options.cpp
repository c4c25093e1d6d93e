#include "man_options.hpp"

#include <cctype>
#include <sstream>

namespace xendump::test {

namespace {

std::vector<std::string> words(const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// The macro lines of a page (those starting with '.'), without the dot.
std::vector<std::vector<std::string>> macro_lines(std::string_view mdoc) {
    std::vector<std::vector<std::string>> out;
    std::istringstream in{std::string(mdoc)};
    for (std::string line; std::getline(in, line);)
        if (line.size() > 1 && line[0] == '.') out.push_back(words(line.substr(1)));
    return out;
}

bool is_option_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; }

}  // namespace

std::map<std::string, bool> options_in_mdoc(std::string_view mdoc) {
    std::map<std::string, bool> out;
    for (const auto& w : macro_lines(mdoc)) {
        std::vector<std::string> group;  // "Fl a , Fl b": one option, two spellings
        for (size_t i = 0; i < w.size(); ++i) {
            if (w[i] != "Fl" || i + 1 >= w.size()) continue;
            const std::string name = "-" + w[i + 1];
            group.push_back(name);
            out.try_emplace(name, false);
            const std::string next = i + 2 < w.size() ? w[i + 2] : "";
            if (next == "," && i + 3 < w.size() && w[i + 3] == "Fl") {
                i += 2;  // the group goes on at the next Fl
                continue;
            }
            if (next == "Ar")
                for (const auto& g : group) out[g] = true;
            group.clear();
            ++i;
        }
    }
    return out;
}

std::set<std::string> commands_in_mdoc(std::string_view mdoc) {
    std::set<std::string> out;
    for (const auto& w : macro_lines(mdoc))
        for (size_t i = 0; i + 1 < w.size(); ++i)
            if (w[i] == "Cm") out.insert(w[i + 1]);
    return out;
}

std::vector<std::string> sections_in_mdoc(std::string_view mdoc) {
    std::vector<std::string> out;
    for (const auto& w : macro_lines(mdoc)) {
        if (w.empty() || w[0] != "Sh") continue;
        std::string title;
        for (size_t i = 1; i < w.size(); ++i) title += (i > 1 ? " " : "") + w[i];
        out.push_back(title);
    }
    return out;
}

std::set<std::string> options_in_text(std::string_view text) {
    std::set<std::string> out;
    for (size_t i = 0; i + 1 < text.size(); ++i) {
        if (text[i] != '-' || (i > 0 && (is_option_char(text[i - 1]) || text[i - 1] == '_'))) continue;
        if (text[i + 1] == '-' && i + 2 < text.size() && std::isalpha(static_cast<unsigned char>(text[i + 2]))) {
            size_t j = i + 2;
            while (j < text.size() && is_option_char(text[j])) ++j;
            out.insert(std::string(text.substr(i, j - i)));
            i = j;
        } else if (std::isalpha(static_cast<unsigned char>(text[i + 1])) &&
                   (i + 2 >= text.size() || !(is_option_char(text[i + 2]) || text[i + 2] == '_'))) {
            out.insert(std::string(text.substr(i, 2)));
            i += 1;
        }
    }
    return out;
}

std::set<std::string> options_in_help(std::string_view help) {
    std::string outside;
    int depth = 0;
    for (char c : help) {
        if (c == '\n') depth = 0;  // a remark ends with its line at the latest
        if (c == '(') ++depth;
        if (depth == 0) outside.push_back(c);
        else outside.push_back(' ');
        if (c == ')' && depth > 0) --depth;
    }
    return options_in_text(outside);
}

std::vector<std::string> commands_in_help(std::string_view help) {
    std::vector<std::string> out;
    std::istringstream in{std::string(help)};
    bool in_commands = false;
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with("Commands:")) {
            in_commands = true;
            continue;
        }
        if (!in_commands) continue;
        if (line.find_first_not_of(" \t") == std::string::npos) break;
        if (line[0] != ' ') break;
        auto w = words(line);
        if (!w.empty() && std::islower(static_cast<unsigned char>(w[0][0]))) out.push_back(w[0]);
    }
    return out;
}

}  // namespace xendump::test
