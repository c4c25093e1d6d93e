// Parsing and validation of the simulated host's spec (simulated-host.md).
// Every refusal names the domain and the key, so a wrong spec is fixed at once.
#include "sim/host_spec.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <set>

#include "sim/json_file.hpp"
#include "util/util.hpp"
#include "util/runs.hpp"
#include "xendump/error.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump::sim {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// DOMID_FIRST_RESERVED (xen/include/public/xen.h): ids from 0x7ff0 are special.
constexpr uint64_t kDomidFirstReserved = 0x7ff0;
// x86 Xen: machine addresses have at most 52 bits, so mfns are below 2^40.
constexpr uint64_t kMfnLimit64 = uint64_t{1} << 40;
// A 32-bit guest's p2m entries are u32 and 0xffffffff means "invalid".
constexpr uint64_t kMfnLimit32 = 0xffffffffULL;
constexpr uint64_t kDefaultP2mSize = 65536;       // 256 MiB
constexpr uint64_t kFirstAutoMfn = 0x100000;      // above the first 4 GiB of the host
constexpr uint64_t kAutoMfnAlign = 0x10000;

using util::hex;

struct Ctx {
    std::string object;  // spec path
    std::string where;   // "domain 7"
    [[noreturn]] void fail(const std::string& msg) const {
        throw Error(where.empty() ? msg : where + ": " + msg, object);
    }
};

uint64_t get_u64(const Ctx& c, const json& v, const std::string& key) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    c.fail(key + ": expected a non-negative integer, got " + v.dump());
}

std::string get_string(const Ctx& c, const json& v, const std::string& key) {
    if (!v.is_string()) c.fail(key + ": expected a string, got " + v.dump());
    return v.get<std::string>();
}

void check_keys(const Ctx& c, const json& obj, const std::string& what, std::initializer_list<const char*> known) {
    if (!obj.is_object()) c.fail(what + ": expected an object, got " + obj.dump());
    for (const auto& item : obj.items()) {
        const std::string& key = item.key();  // a structured binding cannot be captured by clang 14
        if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; }))
            c.fail(what + ": unknown key \"" + key + "\"");
    }
}

// [[a, b, c], ...] with `width` numbers each.
std::vector<std::vector<uint64_t>> get_tuples(const Ctx& c, const json& v, const std::string& key, size_t width) {
    if (!v.is_array()) c.fail(key + ": expected an array, got " + v.dump());
    std::vector<std::vector<uint64_t>> out;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string k = key + "[" + std::to_string(i) + "]";
        if (!v[i].is_array() || v[i].size() != width)
            c.fail(k + ": expected an array of " + std::to_string(width) + " integers, got " + v[i].dump());
        std::vector<uint64_t> t;
        for (const auto& n : v[i]) t.push_back(get_u64(c, n, k));
        out.push_back(std::move(t));
    }
    return out;
}

bool end_overflows(uint64_t start, uint64_t count) { return count > UINT64_MAX - start; }

DomainSpec parse_domain(const Ctx& top, const json& j, const fs::path& base_dir) {
    Ctx c = top;
    c.where = "domains[]";
    check_keys(c, j, "domain", {"domid", "name", "uuid", "type", "guest_width", "vcpus", "p2m_size",
                                "p2m_format", "extents", "p2m_pages_at", "memory", "zero_ranges", "state",
                                "p2m_overrides", "shared_info_overrides", "map_cost", "passthrough", "dying", "writer"});
    DomainSpec d;
    if (!j.contains("domid")) c.fail("a domain has no \"domid\"");
    uint64_t domid = get_u64(c, j["domid"], "domid");
    if (domid >= kDomidFirstReserved) c.fail("domid " + std::to_string(domid) + " is reserved (must be below 32752)");
    d.domid = static_cast<uint32_t>(domid);
    c.where = "domain " + std::to_string(d.domid);

    d.name = j.contains("name") ? get_string(c, j["name"], "name") : "sim" + std::to_string(d.domid);
    if (d.name.empty() || d.name.find('/') != std::string::npos || d.name.size() > 64)
        c.fail("name \"" + d.name + "\": expected 1 to 64 characters without '/'");
    if (j.contains("uuid")) {
        d.uuid = parse_uuid(get_string(c, j["uuid"], "uuid"), c.where + ": uuid", c.object);
    } else {
        // A fixed, recognisable default: 5ed0????-... carrying the domid.
        d.uuid = {0x5e, 0xd0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0,
                  static_cast<uint8_t>(d.domid >> 8), static_cast<uint8_t>(d.domid)};
    }

    std::string type = j.contains("type") ? get_string(c, j["type"], "type") : "pv";
    if (type == "pv") d.type = GuestType::pv;
    else if (type == "hvm") d.type = GuestType::hvm;
    else if (type == "pvh") d.type = GuestType::pvh;
    else c.fail("type \"" + type + "\": expected \"pv\", \"hvm\" or \"pvh\"");

    if (j.contains("guest_width")) {
        uint64_t w = get_u64(c, j["guest_width"], "guest_width");
        if (w != 8 && w != 4) c.fail("guest_width " + std::to_string(w) + ": expected 8 or 4");
        if (!d.is_pv() && w != 8) c.fail("guest_width 4 is for PV guests only (HVM/PVH report 8)");
        d.guest_width = static_cast<unsigned>(w);
    }
    if (j.contains("vcpus")) {
        uint64_t v = get_u64(c, j["vcpus"], "vcpus");
        if (v < 1 || v > 512) c.fail("vcpus " + std::to_string(v) + ": expected 1 to 512");
        d.vcpus = static_cast<unsigned>(v);
    }
    if (j.contains("p2m_format")) {
        std::string f = get_string(c, j["p2m_format"], "p2m_format");
        if (f == "tree") d.p2m_format = P2mFormat::tree;
        else if (f == "linear") d.p2m_format = P2mFormat::linear;
        else if (f == "both") d.p2m_format = P2mFormat::both;
        else c.fail("p2m_format \"" + f + "\": expected \"tree\", \"linear\" or \"both\"");
        if (!d.is_pv() && f != "tree") c.fail("p2m_format is for PV guests only");
    }

    if (j.contains("extents")) {
        for (auto& t : get_tuples(c, j["extents"], "extents", 3)) {
            if (t[2] == 0) c.fail("extent [" + std::to_string(t[0]) + ", " + hex(t[1]) + ", 0]: count is 0");
            if (end_overflows(t[0], t[2]) || end_overflows(t[1], t[2]))
                c.fail("extent [" + std::to_string(t[0]) + ", " + hex(t[1]) + ", " + std::to_string(t[2]) +
                       "]: end overflows");
            d.extents.push_back({t[0], t[1], t[2]});
        }
    }
    std::sort(d.extents.begin(), d.extents.end(), [](auto& a, auto& b) { return a.pfn < b.pfn; });
    uint64_t pfn_end = 0;
    for (auto& e : d.extents) pfn_end = std::max(pfn_end, e.pfn + e.count);
    if (j.contains("p2m_size")) {
        d.p2m_size = get_u64(c, j["p2m_size"], "p2m_size");
        if (d.p2m_size == 0) c.fail("p2m_size is 0");
    } else {
        d.p2m_size = d.extents.empty() ? kDefaultP2mSize : pfn_end;
    }
    if (d.p2m_size > (uint64_t{1} << 40)) c.fail("p2m_size " + std::to_string(d.p2m_size) + " is too large");
    for (size_t i = 0; i < d.extents.size(); ++i) {
        const Extent& e = d.extents[i];
        std::string name = "extent [" + std::to_string(e.pfn) + ", " + hex(e.mfn) + ", " + std::to_string(e.count) + "]";
        if (e.pfn + e.count > d.p2m_size)
            c.fail(name + " ends at pfn " + std::to_string(e.pfn + e.count) + ", outside p2m_size " +
                   std::to_string(d.p2m_size));
        uint64_t limit = d.guest_width == 4 ? kMfnLimit32 : kMfnLimit64;
        if (e.mfn + e.count > limit)
            c.fail(name + ": machine frames reach " + hex(e.mfn + e.count) + ", beyond the limit " + hex(limit) +
                   (d.guest_width == 4 ? " of a 32-bit guest's p2m" : ""));
        if (i > 0 && d.extents[i - 1].pfn + d.extents[i - 1].count > e.pfn)
            c.fail(name + " overlaps the pfns of the extent before it");
    }
    if (j.contains("p2m_pages_at") && !j["p2m_pages_at"].is_null()) {
        if (!d.is_pv()) c.fail("p2m_pages_at is for PV guests only (HVM/PVH keep no p2m in guest memory)");
        d.p2m_pages_at = get_u64(c, j["p2m_pages_at"], "p2m_pages_at");
        if (!d.extent_of_pfn(*d.p2m_pages_at))
            c.fail("p2m_pages_at " + std::to_string(*d.p2m_pages_at) + " is not a present pfn");
    }

    if (j.contains("memory")) {
        const json& m = j["memory"];
        check_keys(c, m, "memory", {"fill", "image"});
        if (m.contains("fill") == m.contains("image"))
            c.fail("memory: expected exactly one of {\"fill\": \"pattern\"|\"zero\"} or {\"image\": PATH}");
        if (m.contains("fill")) {
            std::string f = get_string(c, m["fill"], "memory.fill");
            if (f == "pattern") d.fill = FillKind::pattern;
            else if (f == "zero") d.fill = FillKind::zero;
            else c.fail("memory.fill \"" + f + "\": expected \"pattern\" or \"zero\"");
        } else {
            d.fill = FillKind::image;
            fs::path p = get_string(c, m["image"], "memory.image");
            if (p.is_relative()) p = base_dir / p;
            std::error_code ec;
            if (!fs::is_regular_file(p, ec)) c.fail("memory.image " + p.string() + ": no such regular file");
            d.image = fs::absolute(p).lexically_normal();
        }
    }
    if (j.contains("zero_ranges")) {
        for (auto& t : get_tuples(c, j["zero_ranges"], "zero_ranges", 2)) {
            if (end_overflows(t[0], t[1]) || t[0] + t[1] > d.p2m_size)
                c.fail("zero_range [" + std::to_string(t[0]) + ", " + std::to_string(t[1]) +
                       "] is outside p2m_size " + std::to_string(d.p2m_size));
            if (t[1] > 0) d.zero_ranges.push_back({t[0], t[1]});
        }
        std::sort(d.zero_ranges.begin(), d.zero_ranges.end(), [](auto& a, auto& b) { return a.pfn < b.pfn; });
    }
    if (j.contains("state")) {
        std::string s = get_string(c, j["state"], "state");
        if (s == "running") d.state = InitialState::running;
        else if (s == "paused") d.state = InitialState::paused;
        else if (s == "crashed") d.state = InitialState::crashed;
        else if (s == "shutdown") d.state = InitialState::shutdown;
        else c.fail("state \"" + s + "\": expected \"running\", \"paused\", \"crashed\" or \"shutdown\"");
    }
    const uint64_t width_max = d.guest_width == 4 ? 0xffffffffULL : UINT64_MAX;
    auto fits_width = [&](uint64_t v) { return v <= width_max || v == UINT64_MAX; };
    if (j.contains("p2m_overrides")) {
        auto list = get_tuples(c, j["p2m_overrides"], "p2m_overrides", 2);
        if (!list.empty() && !d.is_pv()) c.fail("p2m_overrides is for PV guests only");
        for (auto& t : list) {
            if (t[0] >= d.p2m_size)
                c.fail("p2m_override for pfn " + std::to_string(t[0]) + " is outside p2m_size " + std::to_string(d.p2m_size));
            if (!fits_width(t[1]))
                c.fail("p2m_override value " + hex(t[1]) + " does not fit a 32-bit guest's p2m entry");
            d.p2m_overrides.emplace_back(t[0], t[1] == UINT64_MAX ? width_max : t[1]);
        }
    }
    if (j.contains("shared_info_overrides")) {
        const json& s = j["shared_info_overrides"];
        check_keys(c, s, "shared_info_overrides",
                   {"max_pfn", "pfn_to_mfn_frame_list_list", "p2m_cr3", "p2m_vaddr", "p2m_generation"});
        if (!s.empty() && !d.is_pv()) c.fail("shared_info_overrides is for PV guests only");
        auto field = [&](const char* key, std::optional<uint64_t>& out) {
            if (!s.contains(key)) return;
            uint64_t v = get_u64(c, s[key], std::string("shared_info_overrides.") + key);
            if (!fits_width(v)) c.fail(std::string("shared_info_overrides.") + key + " " + hex(v) +
                                       " does not fit a 32-bit guest's shared_info");
            out = v == UINT64_MAX ? width_max : v;
        };
        field("max_pfn", d.shared_info_overrides.max_pfn);
        field("pfn_to_mfn_frame_list_list", d.shared_info_overrides.pfn_to_mfn_frame_list_list);
        field("p2m_cr3", d.shared_info_overrides.p2m_cr3);
        field("p2m_vaddr", d.shared_info_overrides.p2m_vaddr);
        field("p2m_generation", d.shared_info_overrides.p2m_generation);
    }
    if (j.contains("map_cost")) {
        const json& m = j["map_cost"];
        check_keys(c, m, "map_cost", {"per_call_us", "per_page_ns"});
        if (m.contains("per_call_us")) d.per_call_us = get_u64(c, m["per_call_us"], "map_cost.per_call_us");
        if (m.contains("per_page_ns")) d.per_page_ns = get_u64(c, m["per_page_ns"], "map_cost.per_page_ns");
    }
    auto get_bool = [&](const char* key) {
        if (!j.contains(key)) return false;
        if (!j[key].is_boolean()) c.fail(std::string(key) + ": expected true or false, got " + j[key].dump());
        return j[key].get<bool>();
    };
    d.passthrough = get_bool("passthrough");
    d.dying = get_bool("dying");
    if (j.contains("writer")) {
        const json& w = j["writer"];
        check_keys(c, w, "writer", {"rate", "pattern", "first_pfn", "pages", "seed"});
        if (w.contains("rate")) d.writer.rate = get_u64(c, w["rate"], "writer.rate");
        if (w.contains("pattern")) {
            const std::string name = get_string(c, w["pattern"], "writer.pattern");
            auto p = writer_pattern_from_name(name);
            if (!p) c.fail("writer.pattern \"" + name + "\": expected \"sequential\", \"random\" or \"hot\"");
            d.writer.pattern = *p;
        }
        if (w.contains("first_pfn")) d.writer.first_pfn = get_u64(c, w["first_pfn"], "writer.first_pfn");
        if (d.writer.first_pfn >= d.p2m_size)
            c.fail("writer.first_pfn " + std::to_string(d.writer.first_pfn) + " is not below p2m_size " +
                   std::to_string(d.p2m_size));
        d.writer.pages = w.contains("pages") ? get_u64(c, w["pages"], "writer.pages") : d.p2m_size - d.writer.first_pfn;
        if (d.writer.pages == 0 || d.writer.pages > d.p2m_size - d.writer.first_pfn)
            c.fail("writer.pages " + std::to_string(d.writer.pages) + ": expected 1 to p2m_size - first_pfn");
        if (w.contains("seed")) d.writer.seed = get_u64(c, w["seed"], "writer.seed");
    }
    return d;
}

}  // namespace

void check_machine_frames(const std::vector<DomainSpec>& domains, const std::string& object) {
    const Ctx c{object, {}};
    struct Owned {
        uint64_t mfn, count;
        uint32_t domid;
    };
    std::vector<Owned> all;
    for (auto& d : domains)
        for (auto& e : d.extents) all.push_back({e.mfn, e.count, d.domid});
    std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.mfn < b.mfn; });
    for (size_t i = 1; i < all.size(); ++i) {
        const Owned& a = all[i - 1];
        const Owned& b = all[i];
        if (a.mfn + a.count > b.mfn)
            c.fail("machine frames " + hex(b.mfn) + "-" + hex(std::min(a.mfn + a.count, b.mfn + b.count) - 1) +
                   " are given to domain " + std::to_string(a.domid) + " and domain " + std::to_string(b.domid) +
                   (a.domid == b.domid ? " twice" : ""));
    }
}

uint64_t DomainSpec::present_pages() const {
    uint64_t n = 0;
    for (auto& e : extents) n += e.count;
    return n;
}

const Extent* DomainSpec::extent_of_pfn(uint64_t pfn) const {
    const auto it = util::run_holding(extents, pfn, &Extent::pfn, &Extent::count);
    return it == extents.end() ? nullptr : &*it;
}

std::array<uint8_t, 16> parse_uuid(const std::string& text, const std::string& where, const std::string& object) {
    std::array<uint8_t, 16> out{};
    auto bad = [&]() -> Error {
        return Error(where + " \"" + text + "\": expected 8-4-4-4-12 hexadecimal digits", object);
    };
    if (text.size() != 36) throw bad();
    size_t n = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (text[i] != '-') throw bad();
            continue;
        }
        int v = std::isxdigit(static_cast<unsigned char>(text[i])) ? std::stoi(std::string(1, text[i]), nullptr, 16) : -1;
        if (v < 0) throw bad();
        out[n / 2] = static_cast<uint8_t>(out[n / 2] | (n % 2 ? v : v << 4));
        ++n;
    }
    return out;
}

HostSpec parse_host_spec(const json& spec, const fs::path& base_dir, const std::string& object,
                         uint64_t first_free_mfn) {
    Ctx c{object, {}};
    check_keys(c, spec, "spec", {"xen_version", "shadow_paging", "domains"});
    HostSpec host;
    if (spec.contains("xen_version")) {
        host.xen_version = get_string(c, spec["xen_version"], "xen_version");
        unsigned major = 0, minor = 0;
        if (std::sscanf(host.xen_version.c_str(), "%u.%u", &major, &minor) != 2)
            c.fail("xen_version \"" + host.xen_version + "\": expected MAJOR.MINOR[EXTRA], e.g. \"4.17.0\"");
    }
    if (spec.contains("shadow_paging")) {
        if (!spec["shadow_paging"].is_boolean()) c.fail("shadow_paging: expected true or false");
        host.shadow_paging = spec["shadow_paging"].get<bool>();
    }
    if (spec.contains("domains")) {
        if (!spec["domains"].is_array()) c.fail("domains: expected an array");
        for (const auto& dj : spec["domains"]) host.domains.push_back(parse_domain(c, dj, base_dir));
    }
    std::sort(host.domains.begin(), host.domains.end(), [](auto& a, auto& b) { return a.domid < b.domid; });
    std::set<std::string> names;
    for (size_t i = 0; i < host.domains.size(); ++i) {
        if (i > 0 && host.domains[i - 1].domid == host.domains[i].domid)
            c.fail("domid " + std::to_string(host.domains[i].domid) + " is used twice");
        if (!names.insert(host.domains[i].name).second)
            c.fail("name \"" + host.domains[i].name + "\" is used twice");
    }
    // Domains without extents get one extent covering their whole p2m, on
    // machine frames nobody else uses.
    uint64_t next_mfn = std::max(kFirstAutoMfn, first_free_mfn);
    for (auto& d : host.domains)
        for (auto& e : d.extents) next_mfn = std::max(next_mfn, e.mfn + e.count);
    for (auto& d : host.domains) {
        if (!d.extents.empty()) continue;
        next_mfn = (next_mfn + kAutoMfnAlign - 1) / kAutoMfnAlign * kAutoMfnAlign;
        uint64_t limit = d.guest_width == 4 ? kMfnLimit32 : kMfnLimit64;
        if (next_mfn + d.p2m_size > limit)
            throw Error("domain " + std::to_string(d.domid) + ": no free machine frames for its default extent", object);
        d.extents.push_back({0, next_mfn, d.p2m_size});
        next_mfn += d.p2m_size;
    }
    check_machine_frames(host.domains, object);
    return host;
}

HostSpec load_host_spec_file(const fs::path& path, uint64_t first_free_mfn) {
    const json j = use_json_file(path, "cannot open the spec file", "not valid JSON", [](const json& doc) { return doc; });
    return parse_host_spec(j, fs::absolute(path).parent_path(), path.string(), first_free_mfn);
}

std::string p2m_format_name(P2mFormat f) {
    switch (f) {
        case P2mFormat::tree: return "tree";
        case P2mFormat::linear: return "linear";
        case P2mFormat::both: return "both";
    }
    return "?";
}

std::string initial_state_name(InitialState s) {
    switch (s) {
        case InitialState::running: return "running";
        case InitialState::paused: return "paused";
        case InitialState::crashed: return "crashed";
        case InitialState::shutdown: return "shutdown";
    }
    return "?";
}

json domain_spec_to_json(const DomainSpec& d) {
    json j;
    j["domid"] = d.domid;
    j["name"] = d.name;
    j["uuid"] = uuid_to_string(d.uuid);
    j["type"] = std::string(format::to_string(d.type));
    j["guest_width"] = d.guest_width;
    j["vcpus"] = d.vcpus;
    j["p2m_size"] = d.p2m_size;
    if (d.is_pv()) j["p2m_format"] = p2m_format_name(d.p2m_format);
    j["extents"] = json::array();
    for (auto& e : d.extents) j["extents"].push_back({e.pfn, e.mfn, e.count});
    if (d.is_pv()) j["p2m_pages_at"] = d.p2m_pages_at ? json(*d.p2m_pages_at) : json(nullptr);
    if (d.fill == FillKind::image) j["memory"] = {{"image", d.image.string()}};
    else j["memory"] = {{"fill", d.fill == FillKind::zero ? "zero" : "pattern"}};
    j["zero_ranges"] = json::array();
    for (auto& z : d.zero_ranges) j["zero_ranges"].push_back({z.pfn, z.count});
    j["state"] = initial_state_name(d.state);
    if (d.is_pv()) {
        j["p2m_overrides"] = json::array();
        for (auto& [pfn, v] : d.p2m_overrides) j["p2m_overrides"].push_back({pfn, v});
        json s = json::object();
        const auto& o = d.shared_info_overrides;
        if (o.max_pfn) s["max_pfn"] = *o.max_pfn;
        if (o.pfn_to_mfn_frame_list_list) s["pfn_to_mfn_frame_list_list"] = *o.pfn_to_mfn_frame_list_list;
        if (o.p2m_cr3) s["p2m_cr3"] = *o.p2m_cr3;
        if (o.p2m_vaddr) s["p2m_vaddr"] = *o.p2m_vaddr;
        if (o.p2m_generation) s["p2m_generation"] = *o.p2m_generation;
        j["shared_info_overrides"] = s;
    }
    j["map_cost"] = {{"per_call_us", d.per_call_us}, {"per_page_ns", d.per_page_ns}};
    if (d.passthrough) j["passthrough"] = true;
    if (d.dying) j["dying"] = true;
    if (d.writer.rate != 0)
        j["writer"] = {{"rate", d.writer.rate},
                       {"pattern", writer_pattern_name(d.writer.pattern)},
                       {"first_pfn", d.writer.first_pfn},
                       {"pages", d.writer.pages},
                       {"seed", d.writer.seed}};
    return j;
}

}  // namespace xendump::sim
