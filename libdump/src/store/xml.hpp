// The XML of S3's responses (ListObjectsV2, multipart uploads, errors): a
// small, bounds-checked parser of elements and text. S3's documents use
// nothing more: no DTD, no processing beyond the <?xml?> declaration, no
// mixed content that matters. Attributes (xmlns=) are skipped, names lose
// their namespace prefix, the five predefined entities and numeric
// character references are decoded. Anything else (a DTD, an unknown
// entity, an unclosed tag, nesting past kMaxDepth) is an Error: libxml2
// would take all of XML, and its history of CVEs, into dom0 for this.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace xendump::store::xml {

inline constexpr size_t kMaxDepth = 16;

struct Node {
    std::string name;  // without its namespace prefix
    std::string text;  // the decoded character data directly inside it
    std::vector<Node> children;

    const Node* child(std::string_view n) const;
    std::vector<const Node*> all(std::string_view n) const;
    // The text of the child `n`; empty when there is none.
    std::string text_of(std::string_view n) const;
};

// Error (with `what` as its object) on anything not well formed as above.
Node parse(std::string_view doc, const std::string& what);

// `text` with & < > " ' escaped.
std::string escape(std::string_view text);

}  // namespace xendump::store::xml
