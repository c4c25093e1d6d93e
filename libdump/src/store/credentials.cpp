// settings_from_environment (xendump/s3.hpp): the AWS tools' variables, the
// shared credentials file and systemd's credentials directory. Nothing
// read here is ever put in a message: errors name files and variables.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "xendump/error.hpp"
#include "xendump/s3.hpp"

namespace xendump::s3 {

namespace {

// A credentials file is a few lines; anything larger is not one.
constexpr uintmax_t kMaxFileSize = 1 << 20;

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

std::string trim(std::string s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return {};
    const auto e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

// The profile's keys of an INI file in the AWS tools' format: [NAME] (or
// [profile NAME]) sections of `key = value` lines, # and ; comments.
// nullopt when the file does not exist.
std::optional<std::map<std::string, std::string>> read_profile(const std::filesystem::path& file,
                                                               const std::string& profile) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) return std::nullopt;
    const auto size = std::filesystem::file_size(file, ec);
    if (ec) throw Error("cannot read the credentials file: " + ec.message(), file.string());
    if (size > kMaxFileSize) throw Error("not a credentials file (larger than 1 MiB)", file.string());
    std::ifstream in(file);
    if (!in) throw Error("cannot open the credentials file", file.string());
    std::map<std::string, std::string> keys;
    bool in_profile = false;
    std::string line;
    unsigned no = 0;
    while (std::getline(in, line)) {
        ++no;
        line = trim(line);
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        if (line.front() == '[') {
            if (line.back() != ']')
                throw Error("line " + std::to_string(no) + ": a section without its ']'", file.string());
            std::string name = trim(line.substr(1, line.size() - 2));
            if (name.starts_with("profile ")) name = trim(name.substr(8));
            in_profile = name == profile;
            continue;
        }
        const auto eq = line.find('=');
        if (eq == std::string::npos)
            throw Error("line " + std::to_string(no) + ": neither a section nor key = value", file.string());
        if (in_profile) keys[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
    }
    return keys;
}

std::optional<Credentials> credentials_of(const std::map<std::string, std::string>& keys, const std::string& where) {
    auto get = [&](const char* k) {
        auto it = keys.find(k);
        return it == keys.end() ? std::string() : it->second;
    };
    Credentials c;
    c.access_key_id = get("aws_access_key_id");
    c.secret_access_key = get("aws_secret_access_key");
    c.session_token = get("aws_session_token");
    if (c.access_key_id.empty() && c.secret_access_key.empty()) return std::nullopt;
    if (c.access_key_id.empty() || c.secret_access_key.empty())
        throw Error("aws_access_key_id and aws_secret_access_key must both be given", where);
    c.source = where;
    return c;
}

}  // namespace

Settings settings_from_environment(const std::string& endpoint, const std::string& region) {
    Settings s;
    const std::string profile = env("AWS_PROFILE").empty() ? "default" : env("AWS_PROFILE");

    // The profile of a file, looked at in order: systemd's credential, then the shared file.
    std::map<std::string, std::string> profile_keys;
    std::optional<Credentials> creds;
    if (!env("AWS_ACCESS_KEY_ID").empty() || !env("AWS_SECRET_ACCESS_KEY").empty()) {
        if (env("AWS_ACCESS_KEY_ID").empty() || env("AWS_SECRET_ACCESS_KEY").empty())
            throw Error("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set", "environment");
        creds = Credentials{env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"), env("AWS_SESSION_TOKEN"),
                            "environment (AWS_ACCESS_KEY_ID)"};
    }
    std::vector<std::filesystem::path> files;
    if (!env("CREDENTIALS_DIRECTORY").empty())
        files.push_back(std::filesystem::path(env("CREDENTIALS_DIRECTORY")) / "aws-credentials");
    if (!env("AWS_SHARED_CREDENTIALS_FILE").empty())
        files.emplace_back(env("AWS_SHARED_CREDENTIALS_FILE"));
    else if (!env("HOME").empty())
        files.push_back(std::filesystem::path(env("HOME")) / ".aws" / "credentials");
    for (const auto& f : files) {
        auto keys = read_profile(f, profile);
        if (!keys) continue;
        if (!creds) creds = credentials_of(*keys, f.string() + " [" + profile + "]");
        if (profile_keys.empty()) profile_keys = std::move(*keys);
        if (creds) break;
    }
    if (!creds)
        throw Error("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, give the systemd "
                    "credential aws-credentials, or write profile [" + profile + "] of ~/.aws/credentials",
                    "environment");
    s.credentials = std::move(*creds);

    auto from_profile = [&](const char* k) {
        auto it = profile_keys.find(k);
        return it == profile_keys.end() ? std::string() : it->second;
    };
    for (const std::string& r : {region, env("AWS_REGION"), env("AWS_DEFAULT_REGION"), from_profile("region")})
        if (!r.empty()) {
            s.region = r;
            break;
        }
    for (const std::string& e : {endpoint, env("AWS_ENDPOINT_URL"), from_profile("endpoint_url")})
        if (!e.empty()) {
            s.endpoint = e;
            break;
        }
    if (s.endpoint.empty()) s.endpoint = "https://s3." + s.region + ".amazonaws.com";
    while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
    return s;
}

}  // namespace xendump::s3
