#include "sim/sim_host.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>

#include "sim/pv_p2m_builder.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::sim {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string domain_object(uint32_t domid) { return "domain " + std::to_string(domid); }

// Everything create() writes for one domain, computed before anything is written.
struct BuiltDomain {
    DomainSpec spec;
    DomainDerived derived;
    std::optional<PvP2mLayout> p2m;  // PV: the structure pages, made as they are written
    std::vector<std::byte> shared_info;
};

BuiltDomain build_domain(const DomainSpec& spec, uint64_t shared_info_mfn) {
    BuiltDomain b;
    b.spec = spec;
    b.derived.shared_info_mfn = shared_info_mfn;
    b.derived.max_pages = spec.present_pages();
    if (spec.is_pv()) {
        PvP2mLayout layout = build_pv_p2m(spec);
        b.derived.entries_per_page = layout.entries_per_page;
        b.derived.frame_list_list_mfn = layout.frame_list_list_mfn;
        b.derived.top_table_mfn = layout.top_table_mfn;
        b.derived.shared_info_arch = {{"max_pfn", layout.max_pfn},
                                      {"pfn_to_mfn_frame_list_list", layout.pfn_to_mfn_frame_list_list},
                                      {"nmi_reason", 0},
                                      {"p2m_cr3", layout.p2m_cr3},
                                      {"p2m_vaddr", layout.p2m_vaddr},
                                      {"p2m_generation", layout.p2m_generation}};
        b.shared_info = build_shared_info(spec, &layout);
        b.derived.p2m_pfns = layout.structure_pfns;
        b.p2m = std::move(layout);
    } else {
        b.derived.shared_info_arch = json::object();
        b.shared_info = build_shared_info(spec, nullptr);
    }
    return b;
}

// The structure pages in p2m_pfns order, 1 MiB at a time: a 1 TiB guest's
// 2 GiB of p2m never sits in memory.
void write_overlay(const fs::path& path, const PvP2mLayout* p2m) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) throw_errno("cannot create", path.string());
    if (!p2m) return;
    std::vector<std::byte> buf;
    buf.reserve(256 * kPageSize);
    p2m->for_each_page([&](uint64_t, const std::byte* page) {
        buf.insert(buf.end(), page, page + kPageSize);
        if (buf.size() < buf.capacity()) return;
        write_fully(fd.get(), buf.data(), buf.size(), path);
        buf.clear();
    });
    write_fully(fd.get(), buf.data(), buf.size(), path);
}

void write_json(const fs::path& path, const json& j) {
    std::string text = j.dump(2) + "\n";
    write_file(path, text.data(), text.size());
}

// A domain's directory and files (simulated-host.md), state.json and
// domain.json last.
void write_domain(const HostPaths& paths, const BuiltDomain& b) {
    const uint32_t id = b.spec.domid;
    fs::create_directory(paths.domain_dir(id));
    write_overlay(paths.overlay(id), b.p2m ? &*b.p2m : nullptr);
    write_file(paths.shared_info(id), b.shared_info.data(), b.shared_info.size());
    if (b.p2m) write_file(paths.p2m_pages(id), b.p2m->p2m_page_pfns.data(), b.p2m->p2m_page_pfns.size() * 8);
    write_state(paths.state_json(id), initial_state(b.spec));
    write_json(paths.domain_json(id), domain_record(b.spec, b.derived));
}

// The first machine frame above every extent of `domains`, rounded up to
// 256: where create() and add() put the shared_info pages.
uint64_t frames_above(const std::vector<DomainSpec>& domains, uint64_t at_least) {
    uint64_t next = at_least;
    for (auto& d : domains)
        for (auto& e : d.extents) next = std::max(next, e.mfn + e.count);
    return (next + 0xff) / 0x100 * 0x100;
}

void check_target_dir(const fs::path& dir) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) return;
    if (!fs::is_directory(dir, ec)) throw Error("exists and is not a directory", dir.string());
    if (!fs::is_empty(dir, ec)) throw Error("exists and is not empty (a host is created in a new directory)", dir.string());
}

void copy_cstr(char* dst, size_t size, const std::string& src) {
    std::memset(dst, 0, size);
    std::memcpy(dst, src.data(), std::min(size - 1, src.size()));
}

}  // namespace

void SimHost::create(const fs::path& dir, const fs::path& spec_file) { create(dir, load_host_spec_file(spec_file)); }

void SimHost::create(const fs::path& dir, const HostSpec& spec) {
    check_target_dir(dir);
    // shared_info is a Xen page shared with the guest: the domain may map its
    // mfn, but it is in no extent and in no p2m (tools map it by
    // shared_info_frame, e.g. xc_sr_save_x86_pv.c map_shinfo()).
    uint64_t next_mfn = frames_above(spec.domains, 0);
    std::vector<BuiltDomain> built;
    for (auto& d : spec.domains) built.push_back(build_domain(d, next_mfn++));

    bool existed = fs::exists(dir);
    HostPaths paths{dir};
    try {
        fs::create_directories(dir / "domains");
        write_file(paths.lock(), "", 0);
        write_file(paths.events(), "", 0);
        json domids = json::array();
        for (auto& b : built) {
            domids.push_back(b.spec.domid);
            write_domain(paths, b);
        }
        // Written last: a directory without host.json is no host.
        write_json(paths.host_json(), {{"format", kHostFormat},
                                               {"xen_version", spec.xen_version},
                                               {"shadow_paging", spec.shadow_paging},
                                               {"domids", domids}});
    } catch (...) {
        std::error_code ec;
        if (existed) {
            for (auto& entry : fs::directory_iterator(dir, ec)) fs::remove_all(entry.path(), ec);
        } else {
            fs::remove_all(dir, ec);
        }
        throw;
    }
}

void SimHost::add(const fs::path& dir, const fs::path& spec_file) {
    HostLock lock(HostPaths{dir});
    const SimHost host(dir);
    // The new domains' machine frames: above the host's (its domains' and
    // their shared_info pages) unless the spec places them, and never on a
    // frame the host gave already.
    std::vector<DomainSpec> all;
    std::vector<uint64_t> shared_info_mfns;
    uint64_t above = 0;
    for (uint32_t id : host.domids()) {
        const SimDomain* d = host.find(id);
        all.push_back(d->spec());
        shared_info_mfns.push_back(d->derived().shared_info_mfn);
        above = std::max(above, d->derived().shared_info_mfn + 1);
    }
    above = frames_above(all, above);
    const HostSpec spec = load_host_spec_file(spec_file, above);
    for (const auto& n : spec.domains) {
        for (const auto& old : all) {
            if (n.domid == old.domid)
                throw Error("domain " + std::to_string(n.domid) + ": the host has a domain with this id already",
                            spec_file.string());
            if (n.name == old.name && !host.state(old.domid)->destroyed)
                throw Error("domain " + std::to_string(n.domid) + ": the host has a domain named \"" + n.name +
                                "\" already (domain " + std::to_string(old.domid) + ")",
                            spec_file.string());
        }
        for (const auto& e : n.extents)
            for (uint64_t m : shared_info_mfns)
                if (m >= e.mfn && m - e.mfn < e.count)
                    throw Error("domain " + std::to_string(n.domid) + ": machine frame " + std::to_string(m) +
                                    " is a shared_info page of the host",
                                spec_file.string());
        all.push_back(n);
    }
    check_machine_frames(all, spec_file.string());
    uint64_t next_mfn = frames_above(all, above);
    std::vector<BuiltDomain> built;
    for (auto& d : spec.domains) built.push_back(build_domain(d, next_mfn++));
    const HostPaths& paths = host.paths();
    std::vector<uint32_t> added;
    try {
        for (auto& b : built) {
            write_domain(paths, b);
            added.push_back(b.spec.domid);
        }
        // host.json replaced last (rename): the domains exist for every
        // process from then on (find() and domids() read it again).
        std::vector<uint32_t> domids = host.domids();
        domids.insert(domids.end(), added.begin(), added.end());
        replace_file(paths.host_json(),
                     json{{"format", kHostFormat},
                          {"xen_version", host.xen_version_string()},
                          {"shadow_paging", host.shadow_paging()},
                          {"domids", domids}}
                             .dump(2) +
                         "\n",
                     "the host description");
    } catch (...) {
        std::error_code ec;
        for (auto& b : built) fs::remove_all(paths.domain_dir(b.spec.domid), ec);
        throw;
    }
}

SimHost::SimHost(const fs::path& dir) : paths_{dir} {
    std::lock_guard lock(domains_mutex_);
    load_domains();
}

void SimHost::load_domains() const {
    // The inode first: a host.json replaced while it is read is read again
    // at the next lookup.
    struct stat st {};
    if (::stat(paths_.host_json().c_str(), &st) != 0) st = {};
    std::ifstream in(paths_.host_json());
    if (!in) throw Error("not a simulated host (no host.json; create one with xen-dump-sim create)", paths_.dir.string());
    std::vector<uint32_t> ids;
    try {
        json j = json::parse(in);
        if (j.at("format").get<std::string>() != kHostFormat)
            throw Error("host.json has an unknown format \"" + j.at("format").get<std::string>() + "\"",
                        paths_.dir.string());
        if (!loaded_) {  // the constructor's read only
            xen_version_ = j.at("xen_version").get<std::string>();
            shadow_paging_ = j.value("shadow_paging", false);
        }
        ids = j.at("domids").get<std::vector<uint32_t>>();
    } catch (const json::exception& e) {
        throw Error(std::string("corrupt host.json: ") + e.what(), paths_.host_json().string());
    }
    // Domains are only ever added (xen-dump-sim add): a SimDomain handed out stays.
    for (uint32_t id : ids)
        if (!domains_.contains(id)) domains_[id] = std::make_unique<SimDomain>(paths_, id);
    host_json_ino_ = st.st_ino;
    loaded_ = true;
}

void SimHost::reload_if_replaced() const {
    struct stat st {};
    if (::stat(paths_.host_json().c_str(), &st) == 0 && st.st_ino != host_json_ino_) load_domains();
}

format::XenVersionDesc SimHost::xen_version() const {
    format::XenVersionDesc v{};
    unsigned major = 0, minor = 0;
    int used = 0;
    std::sscanf(xen_version_.c_str(), "%u.%u%n", &major, &minor, &used);
    v.major_version = major;
    v.minor_version = minor;
    copy_cstr(v.extra_version, sizeof v.extra_version, xen_version_.substr(static_cast<size_t>(used)));
    copy_cstr(v.compiler, sizeof v.compiler, "xen-dump-sim (simulated host)");
    copy_cstr(v.compile_by, sizeof v.compile_by, "xen-dump-sim");
    copy_cstr(v.compile_domain, sizeof v.compile_domain, "simulated");
    copy_cstr(v.compile_date, sizeof v.compile_date, "simulated");
    copy_cstr(v.capabilities, sizeof v.capabilities, "xen-3.0-x86_64 hvm-3.0-x86_32 hvm-3.0-x86_32p hvm-3.0-x86_64");
    copy_cstr(v.changeset, sizeof v.changeset, "simulated");
    v.platform_virt_start = 0xffff800000000000ULL;  // HYPERVISOR_VIRT_START of x86_64 Xen
    v.pagesize = kPageSize;
    return v;
}

std::vector<uint32_t> SimHost::domids() const {
    std::lock_guard lock(domains_mutex_);
    reload_if_replaced();
    std::vector<uint32_t> out;
    for (auto& [id, d] : domains_) out.push_back(id);
    return out;
}

const SimDomain* SimHost::find(uint32_t domid) const {
    std::lock_guard lock(domains_mutex_);
    auto it = domains_.find(domid);
    if (it == domains_.end()) {  // added since? (host.json is replaced by rename)
        reload_if_replaced();
        it = domains_.find(domid);
    }
    return it == domains_.end() ? nullptr : it->second.get();
}

std::shared_ptr<const DomainState> SimHost::state(uint32_t domid) const {
    if (!find(domid)) throw Error("no such domain", domain_object(domid), std::nullopt, ESRCH);
    const fs::path path = paths_.state_json(domid);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw_errno("cannot stat the domain state", path.string());
    const int64_t mtime = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
    std::lock_guard lock(cache_mutex_);
    CachedState& c = cache_[domid];
    // state.json is replaced by rename, so a change always brings a new inode.
    if (!c.state || c.ino != st.st_ino || c.mtime_ns != mtime || c.size != st.st_size) {
        c.state = std::make_shared<const DomainState>(read_state(path));
        c.ino = st.st_ino;
        c.mtime_ns = mtime;
        c.size = st.st_size;
    }
    return c.state;
}

const SimDomain& SimHost::live(uint32_t domid) const {
    const SimDomain* d = find(domid);
    if (!d || state(domid)->destroyed) throw Error("no such domain", domain_object(domid), std::nullopt, ESRCH);
    return *d;
}

DomainInfo SimHost::info(const SimDomain& d, const DomainState& s) const {
    DomainInfo i;
    const DomainSpec& spec = d.spec();
    i.domid = spec.domid;
    i.dying = spec.dying;
    i.shutdown = s.shutdown;
    i.shutdown_reason = s.shutdown_reason;
    i.paused = s.pause_count > 0;
    i.hvm = !spec.is_pv();
    i.pvh = spec.type == GuestType::pvh;
    i.tot_pages = spec.present_pages() - s.ballooned_pages();
    i.max_pages = d.derived().max_pages;
    i.shared_info_frame = d.derived().shared_info_mfn;
    i.max_vcpu_id = spec.vcpus - 1;
    i.handle = spec.uuid;
    return i;
}

template <typename Change>
void SimHost::change_state(uint32_t domid, const char* event, Change change) {
    if (!find(domid)) throw Error("no such domain", domain_object(domid), std::nullopt, ESRCH);
    HostLock lock(paths_);
    const fs::path path = paths_.state_json(domid);
    DomainState s = read_state(path);
    if (s.destroyed) throw Error("no such domain (destroyed)", domain_object(domid), std::nullopt, ESRCH);
    change(s);
    write_state(path, s);
    if (event) append_event(paths_, std::string(event) + " " + std::to_string(domid));
}

void SimHost::crash(uint32_t domid) { shutdown(domid, ShutdownReason::crash); }

void SimHost::shutdown(uint32_t domid, ShutdownReason reason) {
    change_state(domid, reason == ShutdownReason::crash ? "crash" : "shutdown", [&](DomainState& s) {
        if (s.shutdown) throw Error("already shut down (" + s.name() + ")", domain_object(domid));
        s.shutdown = true;
        s.shutdown_reason = reason;
    });
}

void SimHost::destroy(uint32_t domid) {
    change_state(domid, "destroy", [](DomainState& s) { s.destroyed = true; });
}

void SimHost::pause(uint32_t domid) {
    change_state(domid, nullptr, [&](DomainState& s) {
        // Xen refuses to nest more than 255 toolstack pauses (EOVERFLOW).
        if (s.pause_count >= 255) throw Error("paused too often", domain_object(domid), std::nullopt, EOVERFLOW);
        ++s.pause_count;
    });
}

void SimHost::unpause(uint32_t domid) {
    change_state(domid, nullptr, [&](DomainState& s) {
        if (s.pause_count == 0) throw Error("not paused", domain_object(domid), std::nullopt, EINVAL);
        --s.pause_count;
    });
}

void SimHost::balloon(uint32_t domid, uint64_t pfn, uint64_t count) { change_population(domid, pfn, count, false); }

void SimHost::unballoon(uint32_t domid, uint64_t pfn, uint64_t count) { change_population(domid, pfn, count, true); }

uint64_t SimHost::p2m_generation(const SimDomain& d, const DomainState& s) const {
    const json& arch = d.derived().shared_info_arch;
    const uint64_t created = arch.is_object() ? arch.value("p2m_generation", uint64_t{0}) : 0;
    // Only a guest with the linear p2m list keeps the generation.
    return d.derived().top_table_mfn ? created + 2 * s.p2m_changes : created;
}

void SimHost::change_population(uint32_t domid, uint64_t pfn, uint64_t count, bool populate) {
    const SimDomain& d = live(domid);
    const DomainSpec& spec = d.spec();
    const std::string object = domain_object(domid);
    const char* what = populate ? "unballoon" : "balloon";
    if (count == 0) throw Error(std::string(what) + ": count is 0", object);
    if (pfn >= spec.p2m_size || count > spec.p2m_size - pfn)
        throw Error(std::string(what) + ": pfns " + std::to_string(pfn) + "+" + std::to_string(count) +
                        " are outside p2m_size " + std::to_string(spec.p2m_size),
                    object);
    LiveFiles& files = live_files(d);
    change_state(domid, nullptr, [&](DomainState& s) {
        for (uint64_t p = pfn; p < pfn + count; ++p) {
            if (populate && !s.is_ballooned(p))
                throw Error("unballoon: pfn " + std::to_string(p) + " is not ballooned out", object);
            if (!populate && (!spec.extent_of_pfn(p) || s.is_ballooned(p)))
                throw Error("balloon: pfn " + std::to_string(p) + " is not present", object);
            if (!populate && d.holds_p2m_structure(p))
                throw Error("balloon: pfn " + std::to_string(p) + " holds the guest's p2m", object);
        }
        auto mark = [&](uint64_t p, bool dirty) {
            if (!s.logdirty || p / 64 >= files.dirty.size()) return;
            uint64_t& word = files.dirty.data()[p / 64];
            word = dirty ? word | (uint64_t{1} << (p % 64)) : word & ~(uint64_t{1} << (p % 64));
        };
        if (spec.is_pv()) {
            // The guest writes its own p2m pages: INVALID_P2M_ENTRY for a pfn
            // given back, the pfn's frame for one taken back.
            UniqueFd fd(::open(paths_.overlay(domid).c_str(), O_RDWR | O_CLOEXEC));
            if (!fd) throw_errno("cannot open", paths_.overlay(domid).string());
            const uint64_t per_page = d.derived().entries_per_page;
            std::vector<std::byte> entries;
            uint64_t p = pfn;
            while (p < pfn + count) {
                auto [page_pfn, offset] = d.p2m_entry_location(p);
                const uint64_t in_page = std::min(pfn + count - p, per_page - p % per_page);
                entries.assign(static_cast<size_t>(in_page * spec.guest_width), std::byte{0xff});
                for (uint64_t i = 0; populate && i < in_page; ++i) {
                    const Extent* e = spec.extent_of_pfn(p + i);
                    const uint64_t mfn = e->mfn + (p + i - e->pfn);
                    std::memcpy(entries.data() + i * spec.guest_width, &mfn, spec.guest_width);  // little-endian
                }
                const off_t at = static_cast<off_t>(d.overlay_offset(page_pfn) + offset);
                if (::pwrite(fd.get(), entries.data(), entries.size(), at) != static_cast<ssize_t>(entries.size()))
                    throw_errno("cannot write the p2m", paths_.overlay(domid).string(), static_cast<uint64_t>(at));
                mark(page_pfn, true);
                p += in_page;
            }
            ++s.p2m_changes;
        } else {
            for (uint64_t p = pfn; p < pfn + count; ++p) mark(p, populate);
        }
        if (populate)
            s.remove_ballooned(pfn, count);
        else
            s.add_ballooned(pfn, count);
    });
}

SimHost::LiveFiles& SimHost::live_files(const SimDomain& d) {
    std::lock_guard lock(live_mutex_);
    LiveFiles& f = live_[d.domid()];
    if (!f.dirty) f.dirty = SharedWords(paths_.dirty_bitmap(d.domid()), (d.spec().p2m_size + 63) / 64);
    if (!f.writer && d.spec().writer.enabled())
        f.writer = SharedWords(paths_.writer_state(d.domid()), kWriterHeaderWords + d.spec().writer.pages);
    return f;
}

// Xen's refusals (simulated-host.md "Log-dirty and the writer"), in the
// order Xen meets them: a dying domain, a PV guest without shadow paging,
// passed-through devices, log-dirty held already.
void SimHost::enable_logdirty(uint32_t domid) {
    const SimDomain& d = live(domid);
    const std::string object = domain_object(domid);
    if (d.spec().dying) throw Error("log-dirty refused: the domain is dying", object, std::nullopt, EINVAL);
    if (d.spec().is_pv() && !shadow_paging_)
        throw Error("log-dirty refused: a PV guest needs shadow paging, which this hypervisor is built without "
                    "(CONFIG_SHADOW_PAGING)",
                    object, std::nullopt, EOPNOTSUPP);
    if (d.spec().passthrough)
        throw Error("log-dirty refused: the domain has passed-through PCI devices", object, std::nullopt, EINVAL);
    LiveFiles& f = live_files(d);
    change_state(domid, nullptr, [&](DomainState& s) {
        if (s.logdirty)
            throw Error("log-dirty refused: it is already on (a migration or checkpoint in progress)", object,
                        std::nullopt, EBUSY);
        s.logdirty = true;
        std::fill(f.dirty.data(), f.dirty.data() + f.dirty.size(), 0);
    });
}

uint64_t SimHost::read_dirty(uint32_t domid, DirtyRead how, std::span<uint64_t> bitmap, uint64_t pages) {
    const SimDomain& d = live(domid);
    LiveFiles& f = live_files(d);
    const uint64_t words = (pages + 63) / 64;
    if (bitmap.size() < words) throw Error("dirty bitmap too small", domain_object(domid), std::nullopt, EINVAL);
    HostLock lock(paths_);
    if (!state(domid)->logdirty) throw Error("log-dirty is off", domain_object(domid), std::nullopt, EINVAL);
    uint64_t count = 0;
    for (uint64_t w = 0; w < words; ++w) {
        uint64_t bits = w < f.dirty.size() ? f.dirty.data()[w] : 0;
        if (w == words - 1 && pages % 64) bits &= (uint64_t{1} << (pages % 64)) - 1;
        bitmap[w] = bits;
        count += static_cast<uint64_t>(__builtin_popcountll(bits));
        if (how != DirtyRead::peek && w < f.dirty.size()) f.dirty.data()[w] &= ~bits;
    }
    return count;
}

void SimHost::disable_logdirty(uint32_t domid) {
    const SimDomain& d = live(domid);
    LiveFiles& f = live_files(d);
    change_state(domid, nullptr, [&](DomainState& s) {
        s.logdirty = false;
        std::fill(f.dirty.data(), f.dirty.data() + f.dirty.size(), 0);
    });
}

std::shared_ptr<const DomainState> SimHost::run_writer(const SimDomain& d, uint64_t mapped) {
    auto s = state(d.domid());
    const WriterSpec& w = d.spec().writer;
    if (!w.enabled() || s->shutdown || s->pause_count > 0 || mapped == 0) return s;
    LiveFiles& f = live_files(d);
    uint64_t* clock = f.writer.data();
    uint64_t* gen = clock + kWriterHeaderWords;
    const uint64_t budget = clock[1] + mapped * w.rate;
    const uint64_t writes = budget / 1000;
    clock[1] = budget % 1000;
    for (uint64_t n = 0; n < writes; ++n) {
        const uint64_t k = clock[0]++;
        const uint64_t i = writer_target(w, k);
        const uint64_t pfn = w.first_pfn + i;
        // Only the guest's own memory: not a hole, a ballooned pfn or a page
        // of its p2m (the writer is a program, not the kernel's p2m code).
        if (!d.spec().extent_of_pfn(pfn) || s->is_ballooned(pfn) ||
            (!d.derived().p2m_pfns.empty() && d.holds_p2m_structure(pfn)))
            continue;
        gen[i] = k + 1;
        if (s->logdirty && pfn / 64 < f.dirty.size()) f.dirty.data()[pfn / 64] |= uint64_t{1} << (pfn % 64);
    }
    return s;
}

uint64_t SimHost::written_generation(const SimDomain& d, uint64_t pfn) {
    const WriterSpec& w = d.spec().writer;
    if (!w.enabled() || pfn < w.first_pfn || pfn - w.first_pfn >= w.pages) return 0;
    return live_files(d).writer.data()[kWriterHeaderWords + (pfn - w.first_pfn)];
}

json SimHost::info_json(uint32_t domid) const {
    const SimDomain& d = live(domid);
    auto s = state(domid);
    json j = domain_spec_to_json(d.spec());
    j["state"] = s->name();
    j["paused"] = s->pause_count > 0;
    j["pause_count"] = s->pause_count;
    j["nr_pages"] = d.spec().present_pages() - s->ballooned_pages();
    j["max_pages"] = d.derived().max_pages;
    j["shared_info_mfn"] = d.derived().shared_info_mfn;
    j["p2m_pfns"] = d.derived().p2m_pfns;
    j["ballooned"] = json::array();
    for (auto& r : s->ballooned) j["ballooned"].push_back({r.pfn, r.count});
    if (d.spec().is_pv()) {
        j["shared_info"] = d.derived().shared_info_arch;
        j["shared_info"]["p2m_generation"] = p2m_generation(d, *s);
        j["p2m_cr3"] = d.derived().shared_info_arch.at("p2m_cr3");
    }
    j["maximum_gpfn"] = d.spec().p2m_size - 1;
    j["logdirty"] = s->logdirty;
    if (d.spec().writer.enabled()) {
        const SharedWords words(paths_.writer_state(domid), kWriterHeaderWords + d.spec().writer.pages);
        j["writer_writes"] = words.data()[0];
    }
    return j;
}

json SimHost::list_json() const {
    json out = json::array();
    for (auto& [id, d] : domains_) {
        auto s = state(id);
        if (s->destroyed) continue;
        const DomainSpec& spec = d->spec();
        out.push_back({{"domid", id},
                       {"name", spec.name},
                       {"uuid", uuid_to_string(spec.uuid)},
                       {"type", std::string(format::to_string(spec.type))},
                       {"guest_width", spec.guest_width},
                       {"vcpus", spec.vcpus},
                       {"state", s->name()},
                       {"nr_pages", spec.present_pages() - s->ballooned_pages()},
                       {"max_pages", d->derived().max_pages}});
    }
    return out;
}

}  // namespace xendump::sim
