#include "inputs.hpp"

#include <algorithm>
#include <set>

#include "xendump/fd.hpp"

namespace xendump::convert {
namespace fs = std::filesystem;

std::string default_output_name(const std::string& name) {
    std::string base = name;
    if (base.size() > 5 && base.ends_with(".core")) base.resize(base.size() - 5);
    return base + ".v1.core";
}

namespace {

bool skipped_name(const fs::path& p) {
    // The writer's fallback temporaries: never inputs.
    return p.filename().string().starts_with(AtomicFile::kTempPrefix);
}

fs::path output_for(const Options& o, const fs::path& input, const fs::path& relative) {
    if (o.output) return *o.output;
    if (o.output_dir) return fs::path(*o.output_dir) / relative;
    return input.parent_path() / default_output_name(input.filename().string());
}

}  // namespace

std::vector<Job> collect_jobs(const Options& o) {
    std::vector<Job> jobs;
    std::set<fs::path> seen;
    auto add = [&](const fs::path& input, const fs::path& relative) {
        fs::path key = fs::weakly_canonical(input);
        if (!seen.insert(key).second) return;
        std::error_code ec;
        uint64_t size = fs::is_regular_file(input, ec) ? fs::file_size(input, ec) : 0;
        jobs.push_back({input, output_for(o, input, relative), ec ? 0 : size});
    };
    for (const auto& in : o.inputs) {
        fs::path p = in;
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            std::vector<fs::path> found;
            for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
                 !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
                if (it->is_regular_file() && !skipped_name(it->path())) found.push_back(it->path());
            std::sort(found.begin(), found.end());
            for (const auto& f : found) add(f, fs::relative(f, p));
        } else {
            add(p, p.filename());
        }
    }
    return jobs;
}

}  // namespace xendump::convert
