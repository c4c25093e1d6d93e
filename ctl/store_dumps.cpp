#include "store_dumps.hpp"

#include <algorithm>
#include <map>

#include "sidecar.hpp"
#include "uploader.hpp"
#include "xendump/error.hpp"
#include "xendump/s3.hpp"

namespace xendump::ctl {

namespace {

constexpr uint64_t kMaxSidecar = uint64_t{16} << 20;  // as the uploader reads one

struct Objects {
    const s3::ObjectInfo* dump = nullptr;
    const s3::ObjectInfo* sidecar = nullptr;
    uint64_t bytes = 0;  // every object of the dump (its kernel log's too)
};

}  // namespace

std::vector<daemon::DumpEntry> scan_store(const std::string& store) {
    s3::Url url = s3::parse_url(store);
    std::string prefix = url.key;
    if (!prefix.empty() && !prefix.ends_with('/')) prefix += '/';
    s3::Client client(s3::settings_from_environment());
    const std::vector<s3::ObjectInfo> objects = client.list_objects(url.bucket, prefix);

    // PREFIX/HOST/NAME: by HOST and the dump's name (NAME is the dump's,
    // its sidecar's or its kernel log's: dump_dir.hpp, sidecar.hpp).
    using Id = std::pair<std::string, std::string>;
    std::map<Id, Objects> dumps;
    std::vector<std::pair<Id, uint64_t>> logs;
    for (const auto& o : objects) {
        const std::string rest = o.key.substr(prefix.size());
        const auto slash = rest.find('/');
        if (slash == std::string::npos || slash == 0 || rest.find('/', slash + 1) != std::string::npos) continue;
        const std::string host = rest.substr(0, slash), name = rest.substr(slash + 1);
        if (daemon::is_dump_name(name)) {
            dumps[{host, name}].dump = &o;
        } else if (daemon::is_sidecar_name(name)) {
            dumps[{host, name.substr(0, name.size() - 5)}].sidecar = &o;
        } else if (name.ends_with(".dmesg.txt")) {
            logs.push_back({{host, name.substr(0, name.size() - 10)}, o.size});
        } else if (name.ends_with(".dmesg.txt.age")) {
            logs.push_back({{host, name.substr(0, name.size() - 14) + ".age"}, o.size});
        }
    }
    for (auto& [id, d] : dumps) d.bytes = (d.dump ? d.dump->size : 0) + (d.sidecar ? d.sidecar->size : 0);
    for (const auto& [id, size] : logs)
        if (auto it = dumps.find(id); it != dumps.end()) it->second.bytes += size;

    std::vector<daemon::DumpEntry> entries;
    for (const auto& [id, d] : dumps) {
        if (!d.sidecar) continue;  // its upload is under way (the sidecar goes last)
        daemon::DumpEntry e;
        const std::string dir = prefix + id.first + "/";
        e.dump = s3::Url{url.bucket, dir + id.second}.str();
        e.sidecar = s3::Url{url.bucket, d.sidecar->key}.str();
        e.host = id.first;
        e.in_store = d.dump != nullptr;
        e.bytes_on_disk = d.bytes;
        e.time = daemon::parse_iso_time((d.dump ? d.dump : d.sidecar)->last_modified);
        try {
            // One GET, its size known from the listing.
            if (d.sidecar->size > kMaxSidecar) throw Error("too large for a sidecar", e.sidecar.string());
            std::string text(static_cast<size_t>(d.sidecar->size), '\0');
            client.get_range({url.bucket, d.sidecar->key}, 0, std::as_writable_bytes(std::span(text)));
            e.info = daemon::Sidecar::from_json(text, e.sidecar.string());
            if (e.info->start_time) e.time = e.info->start_time;
        } catch (const Error& err) {
            e.sidecar_error = err.what();
        }
        entries.push_back(std::move(e));
    }
    std::stable_sort(entries.begin(), entries.end(),
                     [](const daemon::DumpEntry& a, const daemon::DumpEntry& b) { return a.time < b.time; });
    return entries;
}

}  // namespace xendump::ctl
