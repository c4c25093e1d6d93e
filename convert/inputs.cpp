#include "inputs.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/s3.hpp"

namespace xendump::convert {
namespace fs = std::filesystem;

std::string default_output_name(const std::string& name, bool kdump) {
    std::string base = name;
    if (base.size() > 5 && base.ends_with(".core")) base.resize(base.size() - 5);
    return base + (kdump ? ".kdump" : ".v1.core");
}

namespace {

// An input's own ".age" (an encrypted input) is not part of its output's name.
std::string unsealed(std::string name) {
    if (name.size() > 4 && name.ends_with(".age")) name.resize(name.size() - 4);
    return name;
}

std::string age_suffix(const Options& o) { return o.recipients.empty() ? "" : ".age"; }

}  // namespace

fs::path output_beside(const Options& o, const fs::path& input, bool kdump) {
    return input.parent_path() / (default_output_name(unsealed(input.filename().string()), kdump) + age_suffix(o));
}

namespace {

bool skipped_name(const fs::path& p) {
    // The writer's fallback temporaries: never inputs.
    return p.filename().string().starts_with(AtomicFile::kTempPrefix);
}

// An encrypted output (-r/-R) is an age file: ".age" after the name it
// would have (xen-dump-convert(1)); -o FILE is taken as given.
fs::path output_for(const Options& o, const fs::path& input, const fs::path& relative) {
    if (o.output) return *o.output;
    if (o.output_dir) return fs::path(*o.output_dir) / (unsealed(relative.string()) + age_suffix(o));
    return output_beside(o, input, o.kdump);
}

// The same file however it was named; the path itself when that cannot be
// worked out (a symlink loop). An object of the store: its URL.
fs::path identity_key(const fs::path& p) {
    if (s3::is_url(p.string())) return p;
    std::error_code ec;
    fs::path key = fs::weakly_canonical(fs::absolute(p, ec), ec);
    return ec ? fs::absolute(p).lexically_normal() : key;
}

class Collector {
public:
    explicit Collector(const Options& o) : o_(o) {}

    // A file or directory named on the command line.
    void operand(const fs::path& p) {
        if (p == kStdin) {  // read once, as a flattened stream, into -o FILE
            if (stdin_taken_) return;
            stdin_taken_ = true;
            Job& j = jobs_.emplace_back();
            j.input = p;
            j.output = o_.output.value_or("");
            j.named = true;
            j.format = "flattened";
            if (!o_.output) j.settle(Result::failed, "standard input (-) is rearranged into -o FILE: give -o");
            return;
        }
        if (s3::is_url(p.string())) return object_operand(p.string());
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0) {
            const int err = errno;
            if (Job* j = add(p, p.filename())) j->settle(Result::failed, p.string() + ": cannot open: " + std::strerror(err));
            return;
        }
        if (S_ISDIR(st.st_mode)) return walk(p);
        Job* j = add(p, p.filename());
        if (!j) return;
        j->named = true;
        if (S_ISREG(st.st_mode))
            j->size = static_cast<uint64_t>(st.st_size);
        else
            j->settle(Result::failed, p.string() + ": not a regular file: it is " + util::file_kind(st.st_mode) +
                                          "; only regular files are converted");
    }

    std::vector<Job> take() { return std::move(jobs_); }

private:
    // s3://BUCKET/KEY, an object; s3://BUCKET/PREFIX/ (or the bucket), the
    // objects under it, as a directory's files (named relative to it).
    // Never written to: read by ranged GETs.
    void object_operand(const std::string& text) {
        try {
            const s3::Url url = s3::parse_url(text);
            s3::Client& c = client(url);
            if (!url.key.empty() && !url.key.ends_with('/')) {
                const auto info = c.head_object(url);
                if (Job* j = add(url.str(), fs::path(url.key).filename())) {
                    j->named = true;
                    if (info)
                        j->size = info->size;
                    else
                        j->settle(Result::failed, url.str() + ": no such object in the store");
                }
                return;
            }
            bool any = false;
            for (const s3::ObjectInfo& o : c.list_objects(url.bucket, url.key)) {
                if (o.key.ends_with('/')) continue;  // a "folder" marker
                const fs::path relative = o.key.substr(url.key.size());
                if (skipped_name(relative)) continue;
                any = true;
                if (Job* j = add(s3::Url{url.bucket, o.key}.str(), relative)) j->size = o.size;
            }
            if (!any)
                if (Job* j = add(url.str(), fs::path(url.key).parent_path().filename()))
                    j->settle(Result::failed, url.str() + ": no object under this prefix");
        } catch (const Error& e) {
            if (Job* j = add(text, fs::path(text).filename())) {
                j->named = true;
                j->settle(Result::failed, e.what());
            }
        }
    }

    // One client for the objects named.
    s3::Client& client(const s3::Url& url) {
        if (!client_) client_ = store_client(url.str());
        return *client_;
    }

    void walk(const fs::path& dir) {
        std::vector<fs::path> found;
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
            if (!skipped_name(it->path())) found.push_back(it->path());
        std::sort(found.begin(), found.end());
        for (const auto& f : found) entry(dir, f);
        if (ec)
            if (Job* j = add(dir, dir.filename()))
                j->settle(Result::failed, dir.string() + ": cannot read the directory: " + ec.message());
    }

    // One entry of a directory: whatever it is, the batch goes on.
    void entry(const fs::path& dir, const fs::path& f) {
        struct stat lst {}, st {};
        if (::lstat(f.c_str(), &lst) != 0 || S_ISDIR(lst.st_mode)) return;  // gone, or walked into
        const bool followed = ::stat(f.c_str(), &st) == 0;
        const int err = errno;
        Job* j = add(f, f.lexically_relative(dir));
        if (!j) return;
        if (!followed)
            j->settle(Result::failed, f.string() + ": cannot follow the symbolic link: " + std::strerror(err));
        else if (S_ISREG(st.st_mode))
            j->size = static_cast<uint64_t>(st.st_size);
        else
            j->settle(Result::skipped, std::string("not a regular file: it is ") +
                                           (S_ISLNK(lst.st_mode) ? "a symbolic link to " : "") +
                                           util::file_kind(st.st_mode));
    }

    // Null when the file was named already (once is enough).
    Job* add(const fs::path& input, const fs::path& relative) {
        if (!seen_.insert(identity_key(input)).second) return nullptr;
        Job& j = jobs_.emplace_back();
        j.input = input;
        j.output = output_for(o_, input, relative);
        return &j;
    }

    const Options& o_;
    std::vector<Job> jobs_;
    std::set<fs::path> seen_;
    bool stdin_taken_ = false;
    std::unique_ptr<s3::Client> client_;
};

}  // namespace

std::vector<Job> collect_jobs(const Options& o) {
    Collector c(o);
    for (const auto& in : o.inputs) c.operand(in);
    return c.take();
}

std::unique_ptr<s3::Client> store_client(const std::string& object) {
    try {
        return std::make_unique<s3::Client>(s3::settings_from_environment());
    } catch (const Error& e) {
        // "environment" says where they were looked for: the object says what for.
        throw Error(e.object() == "environment" ? e.message() : e.what(), object);
    }
}

void refuse_shared_outputs(std::vector<Job>& jobs) {
    std::map<fs::path, std::vector<size_t>> writers;
    for (size_t i = 0; i < jobs.size(); ++i)
        if (!jobs[i].settled) writers[identity_key(jobs[i].output)].push_back(i);
    for (const auto& [output, who] : writers) {
        if (who.size() == 1) {
            Job& j = jobs[who[0]];
            if (identity_key(j.input) == output)
                j.settle(Result::failed, j.input.string() + ": the output would be the input itself; choose another with -o or --output-dir");
            continue;
        }
        const bool two = who.size() == 2;
        for (size_t i : who) {
            std::string others;
            for (size_t k : who)
                if (k != i) others += (others.empty() ? "" : ", ") + jobs[k].input.string();
            jobs[i].settle(Result::failed, jobs[i].input.string() + ": this file and " + others + " would " +
                                               (two ? "both" : "all") + " be converted to " + jobs[i].output.string() +
                                               (two ? "; neither" : "; none of them") +
                                               " is converted: convert them one at a time with -o");
        }
    }
}

}  // namespace xendump::convert
