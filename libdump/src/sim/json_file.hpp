// The simulated host's files are JSON (simulated-host.md): one way to read
// one, so that every file that cannot be opened or is corrupt is named, with
// the offset of a syntax error.
#pragma once

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xendump/error.hpp"

namespace xendump::sim {

// Parses `path` and returns what `use` makes of the document. Error
// `cannot_open` (with the errno) when the file cannot be opened; Error
// "`corrupt`: ..." when it is not JSON (at the offset of the error) or
// `use` finds a field missing or of the wrong type (nlohmann::json's
// exceptions). Errors `use` throws itself go on as they are.
template <class Use>
auto use_json_file(const std::filesystem::path& path, const std::string& cannot_open, const std::string& corrupt,
                   Use&& use) {
    std::ifstream in(path);
    if (!in) throw Error(cannot_open, path.string(), std::nullopt, errno);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(corrupt + ": " + e.what(), path.string(), e.byte);
    }
    try {
        return use(j);
    } catch (const nlohmann::json::exception& e) {
        throw Error(corrupt + ": " + e.what(), path.string());
    }
}

}  // namespace xendump::sim
