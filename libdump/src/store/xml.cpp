#include "store/xml.hpp"

#include <cstdint>

#include "xendump/error.hpp"

namespace xendump::store::xml {

const Node* Node::child(std::string_view n) const {
    for (const Node& c : children)
        if (c.name == n) return &c;
    return nullptr;
}

std::vector<const Node*> Node::all(std::string_view n) const {
    std::vector<const Node*> out;
    for (const Node& c : children)
        if (c.name == n) out.push_back(&c);
    return out;
}

std::string Node::text_of(std::string_view n) const {
    const Node* c = child(n);
    return c ? c->text : std::string();
}

namespace {

class Parser {
public:
    Parser(std::string_view doc, const std::string& what) : s_(doc), what_(what) {}

    Node document() {
        prolog();
        Node root = element(0);
        misc();
        if (i_ != s_.size()) fail("content after the root element");
        return root;
    }

private:
    [[noreturn]] void fail(const std::string& why) const {
        throw Error("malformed XML response: " + why, what_, i_);
    }
    bool at(std::string_view t) const { return s_.substr(i_).starts_with(t); }
    void expect(std::string_view t) {
        if (!at(t)) fail("expected '" + std::string(t) + "'");
        i_ += t.size();
    }
    void skip_space() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\n')) ++i_;
    }
    // Skips up to and past `end`.
    void skip_past(std::string_view end) {
        const size_t p = s_.find(end, i_);
        if (p == std::string_view::npos) fail("'" + std::string(end) + "' missing");
        i_ = p + end.size();
    }
    // Comments and processing instructions between elements.
    void misc() {
        for (;;) {
            skip_space();
            if (at("<!--"))
                skip_past("-->");
            else if (at("<?"))
                skip_past("?>");
            else
                return;
        }
    }
    void prolog() {
        misc();
        if (at("<!")) fail("a DTD or declaration (not accepted)");
    }
    static bool name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
               c == '.' || c == ':';
    }
    std::string name() {
        const size_t b = i_;
        while (i_ < s_.size() && name_char(s_[i_])) ++i_;
        if (i_ == b) fail("a name expected");
        std::string_view n = s_.substr(b, i_ - b);
        const size_t colon = n.rfind(':');
        if (colon != std::string_view::npos) n = n.substr(colon + 1);
        return std::string(n);
    }
    void attributes() {
        for (;;) {
            skip_space();
            if (i_ >= s_.size()) fail("unclosed tag");
            if (s_[i_] == '>' || s_[i_] == '/') return;
            name();
            skip_space();
            expect("=");
            skip_space();
            if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) fail("attribute value not quoted");
            const char q = s_[i_++];
            const size_t end = s_.find(q, i_);
            if (end == std::string_view::npos) fail("attribute value not closed");
            i_ = end + 1;
        }
    }
    static void put_utf8(std::string& out, uint32_t cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }
    void reference(std::string& out) {
        const size_t semi = s_.find(';', i_);
        if (semi == std::string_view::npos || semi - i_ > 12) fail("unterminated entity reference");
        const std::string_view ref = s_.substr(i_ + 1, semi - i_ - 1);
        if (ref == "amp") out += '&';
        else if (ref == "lt") out += '<';
        else if (ref == "gt") out += '>';
        else if (ref == "quot") out += '"';
        else if (ref == "apos") out += '\'';
        else if (ref.size() >= 2 && ref[0] == '#') {
            const bool hex = ref[1] == 'x';
            const std::string_view digits = ref.substr(hex ? 2 : 1);
            if (digits.empty()) fail("empty character reference");
            uint32_t cp = 0;
            for (char c : digits) {
                uint32_t d;
                if (c >= '0' && c <= '9') d = static_cast<uint32_t>(c - '0');
                else if (hex && c >= 'a' && c <= 'f') d = static_cast<uint32_t>(c - 'a' + 10);
                else if (hex && c >= 'A' && c <= 'F') d = static_cast<uint32_t>(c - 'A' + 10);
                else fail("bad character reference");
                cp = cp * (hex ? 16 : 10) + d;
                if (cp > 0x10FFFF) fail("character reference out of range");
            }
            put_utf8(out, cp);
        } else {
            fail("unknown entity '&" + std::string(ref) + ";'");
        }
        i_ = semi + 1;
    }
    Node element(size_t depth) {
        if (depth >= kMaxDepth) fail("nested too deep");
        expect("<");
        Node n;
        n.name = name();
        attributes();
        if (at("/>")) {
            i_ += 2;
            return n;
        }
        expect(">");
        for (;;) {
            if (i_ >= s_.size()) fail("<" + n.name + "> not closed");
            const char c = s_[i_];
            if (c == '<') {
                if (at("</")) {
                    i_ += 2;
                    if (name() != n.name) fail("</" + n.name + "> expected");
                    skip_space();
                    expect(">");
                    return n;
                }
                if (at("<!--")) {
                    skip_past("-->");
                } else if (at("<![CDATA[")) {
                    i_ += 9;
                    const size_t end = s_.find("]]>", i_);
                    if (end == std::string_view::npos) fail("CDATA not closed");
                    n.text += s_.substr(i_, end - i_);
                    i_ = end + 3;
                } else if (at("<?")) {
                    skip_past("?>");
                } else if (at("<!")) {
                    fail("a declaration inside an element");
                } else {
                    n.children.push_back(element(depth + 1));
                }
            } else if (c == '&') {
                reference(n.text);
            } else {
                n.text += c;
                ++i_;
            }
        }
    }

    std::string_view s_;
    const std::string& what_;
    size_t i_ = 0;
};

}  // namespace

Node parse(std::string_view doc, const std::string& what) { return Parser(doc, what).document(); }

std::string escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default: out += c;
        }
    }
    return out;
}

}  // namespace xendump::store::xml
