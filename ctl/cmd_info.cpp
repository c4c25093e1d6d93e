// xen-dumpctl info [--json] FILE|MATCH...: what a dump holds (the latest
// one MATCH selects, dump_selection.hpp), from its headers and
// notes (digests are reported present/absent, never recomputed), plus the
// guest kernel found in its pages: release, banner and each vcpu's
// instruction pointer as symbol+offset (kallsyms found by shape, issue 9).
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "compact_readers.hpp"
#include "encrypted.hpp"
#include "sidecar.hpp"
#include "dump_selection.hpp"
#include "guest_kernel.hpp"
#include "options.hpp"
#include "time_spec.hpp"
#include "util/util.hpp"
#include "written_as.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/error.hpp"
#include "xendump/s3.hpp"
#include "xendump/kernel/printk_log.hpp"
#include "xendump/kernel/prstatus.hpp"
#include "xendump/reader.hpp"
#include "xendump/text.hpp"

namespace xendump::ctl {

namespace {

std::string fixed_string(const char* p, size_t n) { return std::string(p, strnlen(p, n)); }

std::string xen_version_string(const format::XenVersionDesc& v) {
    if (v.major_version == 0 && v.minor_version == 0 && v.extra_version[0] == '\0') return {};
    return std::to_string(v.major_version) + "." + std::to_string(v.minor_version) +
           fixed_string(v.extra_version, sizeof v.extra_version);
}

nlohmann::json optional_key(const KeyValues& kv, const char* key) {
    auto v = kv.get(key);
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

using util::hex;

// The instruction pointer of each vcpu (64-bit contexts only: a 32-bit PV
// context has another layout), with its symbol when kallsyms was found.
nlohmann::json vcpu_ips(const DumpReader& r, const DumpKernel& k) {
    nlohmann::json out = nlohmann::json::array();
    if (r.guest_width() != 8) return out;
    for (const auto& v : r.vcpus()) {
        if (v.bytes.size() < kernel::XenVcpuContextX86_64::kSize) continue;
        const auto ctx = kernel::XenVcpuContextX86_64::decode(v.bytes);
        nlohmann::json e;
        e["vcpu"] = v.id;
        e["ip"] = hex(ctx.rip);
        e["symbol"] = nullptr;
        if (auto s = k.symbolize(ctx.rip)) e["symbol"] = *s;
        out.push_back(e);
    }
    return out;
}

// The crash reports of the kernel log (panic, Oops, BUG: printk_log.hpp
// is_crash_report), through the VMCOREINFO note; null without one.
nlohmann::json describe_log(const DumpReader& r, const DumpKernel& k) {
    constexpr size_t kMaxReports = 32;
    if (!k.vmcoreinfo) return nullptr;
    nlohmann::json j;
    j["error"] = nullptr;
    j["records"] = 0;
    j["partial"] = false;
    j["crash_reports"] = nlohmann::json::array();
    try {
        const kernel::PrintkLog log = read_dump_log(r, *k.vmcoreinfo);
        j["records"] = log.records.size();
        j["partial"] = log.partial();
        for (const kernel::PrintkRecord* c : kernel::crash_records(log)) {
            if (j["crash_reports"].size() == kMaxReports) break;
            j["crash_reports"].push_back({{"sequence", c->sequence ? nlohmann::json(*c->sequence) : nullptr},
                                          {"time_ns", c->time_ns},
                                          {"line", kernel::dmesg_first_line(*c)}});
        }
    } catch (const Error& e) {
        j["error"] = e.what();
    }
    return j;
}

// The vcpu that reported the crash and its top frames (backtrace.hpp):
// null without a crash report naming its CPU, kallsyms or VMCOREINFO.
nlohmann::json crash_backtrace(const DumpReader& r, const DumpKernel& k) {
    constexpr size_t kTopFrames = 16;
    if (!k.vmcoreinfo || !k.kallsyms) return nullptr;
    try {
        const kernel::PrintkLog log = read_dump_log(r, *k.vmcoreinfo);
        const DumpBacktraces traces = dump_backtraces(r, &*k.vmcoreinfo, *k.kallsyms, k.release, &log);
        for (const auto& v : traces.vcpus) {
            if (traces.panic_vcpu != v.vcpu || !v.trace) continue;
            nlohmann::json j = backtrace_json(*v.trace, kTopFrames);
            j["vcpu"] = v.vcpu;
            return j;
        }
    } catch (const Error&) {
        // No log (describe_log says why): no crashed vcpu to show.
    }
    return nullptr;
}

nlohmann::json describe_kernel(const DumpReader& r) {
    const DumpKernel k = find_dump_kernel(r);
    nlohmann::json j;
    j["found"] = k.found();
    // Raw in JSON; release_trusted says whether it may name the kernel
    // (kernel::is_release_name: xen-dumpctl debug refuses it otherwise).
    j["release"] = k.release.empty() ? nlohmann::json(nullptr) : nlohmann::json(k.release);
    j["release_trusted"] = k.release.empty() ? nlohmann::json(nullptr) : nlohmann::json(k.release_trusted());
    j["banner"] = k.banner ? nlohmann::json(*k.banner) : nlohmann::json(nullptr);
    j["vmcoreinfo"] = k.vmcoreinfo.has_value();
    auto offset = k.vmcoreinfo ? k.vmcoreinfo->value("KERNELOFFSET") : std::nullopt;
    j["kernel_offset"] = offset ? nlohmann::json(std::string(*offset)) : nlohmann::json(nullptr);
    j["symbols"] = k.kallsyms ? k.kallsyms->table.size() : 0;
    j["vcpu_ips"] = vcpu_ips(r, k);
    j["image_segment"] = nullptr;
    if (auto m = r.kernel_image_mapping()) {
        j["image_segment"] = {{"vaddr", hex(m->vaddr)}, {"paddr", hex(m->paddr)}, {"size", m->size}};
    }
    j["log"] = describe_log(r, k);
    j["crash_backtrace"] = crash_backtrace(r, k);
    return j;
}

// The sidecar object at `url`, one GET (its size asked first).
daemon::Sidecar store_sidecar(const std::string& url) {
    s3::Client client(s3::settings_from_environment());
    const std::vector<std::byte> text = client.get_object(s3::parse_url(url));
    return daemon::Sidecar::from_json(std::string(reinterpret_cast<const char*>(text.data()), text.size()), url);
}

// A compact dump's zero pages. Counting them reads every page descriptor
// (24 bytes a page: 24 MiB for a 4 GiB guest); a dump in the store takes
// them from its sidecar object when it has one (the service's, uploaded
// beside it), with one small GET.
std::optional<uint64_t> zero_pages(const DumpReader& r) {
    if (r.store() && r.format() == FileFormat::kdump) {
        try {
            if (const auto n = store_sidecar(daemon::sidecar_path(r.path()).string()).zero_pages) return n;
        } catch (const Error&) {
            // No sidecar (a dump stored by hand): counted.
        }
    }
    return r.zero_pages();
}

nlohmann::json describe(const DumpReader& r) {
    const auto& kv = r.domain();
    nlohmann::json j;
    j["file"] = r.path().string();
    // How the file was written, as list shows it (written_as.hpp).
    const WrittenAs written = written_as(r);
    j["format"] = written.format;
    j["compression"] = written.compression ? nlohmann::json(*written.compression) : nlohmann::json(nullptr);
    j["dump_level"] = written.dump_level ? nlohmann::json(*written.dump_level) : nlohmann::json(nullptr);
    // A compact file: who else reads its compression (compact_readers.hpp).
    j["readers"] = nullptr;
    j["readers_note"] = nullptr;
    if (written.compression) {
        CompactReaders readers = compact_readers(*written.compression);
        if (r.flattened()) readers = flattened_readers(readers);
        j["readers"] = readers.read;
        if (!readers.not_read.empty()) j["readers_note"] = readers.not_read;
    }
    j["file_size"] = r.file_size();
    auto domid = kv.get(keys::kDomid);
    if (domid && !domid->empty() && domid->find_first_not_of("0123456789") == std::string::npos)
        j["domid"] = std::stoull(*domid);
    else
        j["domid"] = nullptr;
    j["name"] = optional_key(kv, keys::kName);
    j["uuid"] = optional_key(kv, keys::kUuid);
    j["type"] = std::string(format::to_string(r.type()));
    j["guest_width"] = r.guest_width();
    j["nr_pages"] = r.nr_pages();  // a compact file's: its second bitmap, zero pages included
    const auto zero = zero_pages(r);
    j["zero_pages"] = zero ? nlohmann::json(*zero) : nlohmann::json(nullptr);
    j["page_size"] = r.page_size();
    j["nr_runs"] = r.runs().size();
    nlohmann::json vcpus = nlohmann::json::array();
    for (const auto& v : r.vcpus()) vcpus.push_back(v.id);
    j["vcpus"] = vcpus;
    j["digests"] = r.has_digests() ? "present" : "absent";
    j["p2m"] = optional_key(kv, keys::kP2m);
    j["reason"] = optional_key(kv, keys::kReason);
    j["time"] = optional_key(kv, keys::kTime);
    j["writer"] = optional_key(kv, keys::kWriter);
    j["source"] = optional_key(kv, keys::kSource);
    // A live dump (xen-dump-core(5) LIVE=): how it was consistent, or not.
    j["live"] = optional_key(kv, keys::kLive);
    j["pause_usec"] = optional_key(kv, keys::kPauseUsec);
    j["live_rounds"] = optional_key(kv, keys::kLiveRounds);
    j["pages_recopied"] = optional_key(kv, keys::kPagesRecopied);
    j["live_restarts"] = optional_key(kv, keys::kLiveRestarts);
    j["unreadable"] = r.unreadable_pfns().size();
    auto xv = xen_version_string(r.xen_version());
    j["xen_version"] = xv.empty() ? nlohmann::json(nullptr) : nlohmann::json(xv);
    j["domain"] = nlohmann::json::object();
    for (const auto& [k, v] : kv.items()) j["domain"][k] = v;
    j["kernel"] = describe_kernel(r);
    return j;
}

// A value for the text output: a string under the one rule for guest text
// (escape_text: the notes, the banner, symbol names and errors may hold what
// the guest or the file's writer chose), "-" for null.
std::string text_of(const nlohmann::json& v) {
    if (v.is_null()) return "-";
    if (v.is_string()) return escape_text(v.get<std::string>());
    return v.dump();
}

// A line of the guest's log as dmesg prints it (escaped already).
std::string dmesg_text_of(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : text_of(v); }

// A NT_XEN_DOMAIN value the writer escaped (NAME): under today's rule
// whichever rule wrote it.
std::string note_text_of(const nlohmann::json& v) {
    return v.is_string() ? reescape_text(v.get<std::string>()) : text_of(v);
}

void print_text(const nlohmann::json& j) {
    auto line = [](const char* label, const std::string& value) { std::printf("%-13s %s\n", label, value.c_str()); };
    line("File:", text_of(j["file"]));
    if (j.contains("store"))
        line("Store:", "object of " + cli::human_bytes(j["store"]["object_size"].get<uint64_t>()) + ", read by " +
                           text_of(j["store"]["requests"]) + " ranged GETs of " +
                           cli::human_bytes(j["store"]["block_size"].get<uint64_t>()) + " blocks: " +
                           text_of(j["store"]["bytes_fetched"]) + " bytes fetched");
    if (j.contains("encrypted")) {
        std::string types;
        for (const auto& t : j["encrypted"]["types"]) types += (types.empty() ? "" : ", ") + text_of(t);
        line("Encrypted:", "age, " + j["encrypted"]["recipients"].dump() + " recipient(s): " + types);
    }
    if (j.contains("flattened"))
        line("Flattened:", "makedumpfile's flattened format (-F), " + text_of(j["flattened"]["records"]) +
                               " records in " + cli::human_bytes(j["flattened"]["stored_size"].get<uint64_t>()) +
                               ": read as the file it carries (makedumpfile -R or xen-dump-convert rearranges it)");
    // As list's FORMAT column (v1, kdump/zstd/d31), then what it is.
    WrittenAs w{text_of(j["format"]), std::nullopt, std::nullopt};
    if (!j["compression"].is_null()) w.compression = j["compression"].get<std::string>();
    if (!j["dump_level"].is_null()) w.dump_level = j["dump_level"].get<unsigned>();
    line("Format:", format_column(w) + (w.format == "v1"      ? " (xen-dump-core)"
                                        : w.format == "kdump" ? " (compact: makedumpfile's compressed kdump file)"
                                                              : " (xl dump-core, sections only)"));
    if (!j["readers"].is_null()) {
        const CompactReaders readers{j["readers"].get<std::vector<std::string>>(),
                                     j["readers_note"].is_string() ? j["readers_note"].get<std::string>() : ""};
        line("Readers:", readers_line(readers));
    }
    line("Domain:", text_of(j["domid"]) + " (" + note_text_of(j["name"]) + ")");
    line("UUID:", text_of(j["uuid"]));
    line("Type:", text_of(j["type"]) + ", " + std::to_string(j["guest_width"].get<unsigned>() * 8) + "-bit");
    const uint64_t pages = j["nr_pages"].get<uint64_t>();
    line("Pages:", std::to_string(pages) + " (" + cli::human_bytes(pages * j["page_size"].get<uint64_t>()) + ")");
    if (!j["zero_pages"].is_null())
        line("Zero pages:", text_of(j["zero_pages"]) + " of them (stored as the one shared zero page)");
    line("Runs:", text_of(j["nr_runs"]));
    std::string ids;
    for (const auto& v : j["vcpus"]) {
        if (!ids.empty()) ids += ',';
        ids += v.dump();
    }
    line("VCPUs:", std::to_string(j["vcpus"].size()) + (ids.empty() ? "" : " (" + ids + ")"));
    line("Digests:", text_of(j["digests"]));
    line("P2M:", text_of(j["p2m"]));
    line("Reason:", text_of(j["reason"]));
    line("Time:", text_of(j["time"]));
    line("Writer:", text_of(j["writer"]));
    if (!j["source"].is_null()) line("Source:", text_of(j["source"]));
    if (j["live"] == "precopy")
        line("Live:", "consistent (pre-copy): the guest paused " + text_of(j["pause_usec"]) + " us after " +
                          text_of(j["live_rounds"]) + " round(s), " + text_of(j["pages_recopied"]) +
                          " page(s) copied again" +
                          (j["live_restarts"].is_null()
                               ? std::string()
                               : ", started over " + text_of(j["live_restarts"]) +
                                     " time(s) as the guest's memory layout changed"));
    else if (!j["live"].is_null())
        line("Live:", text_of(j["live"]) + (j["live"] == "inconsistent" ? " (never paused: pages of different instants)" : ""));
    line("Unreadable:", text_of(j["unreadable"]) + " pages");
    line("Xen version:", text_of(j["xen_version"]));
    const auto& k = j["kernel"];
    if (!k["found"].get<bool>()) {
        line("Kernel:", "no Linux kernel found (no VMCOREINFO, no kallsyms tables in the pages)");
        return;
    }
    if (k["release"].is_null()) line("Kernel:", "-");
    else if (k["release_trusted"].get<bool>()) line("Kernel:", text_of(k["release"]));
    else line("Kernel:", shown_release(k["release"].get<std::string>()) + ": not a release name, debug needs --vmlinux");
    line("Banner:", text_of(k["banner"]));
    line("VMCOREINFO:", k["vmcoreinfo"].get<bool>() ? "present" : "absent");
    if (!k["kernel_offset"].is_null()) line("Kernel offset:", "0x" + text_of(k["kernel_offset"]));
    if (const auto& m = k["image_segment"]; !m.is_null())
        line("Image PT_LOAD:", text_of(m["vaddr"]) + " -> paddr " + text_of(m["paddr"]) + ", " +
                                   cli::human_bytes(m["size"].get<uint64_t>()));
    line("Symbols:", k["symbols"].get<size_t>() ? text_of(k["symbols"]) + " (kallsyms)" : "none found");
    for (const auto& v : k["vcpu_ips"])
        line(("VCPU " + v["vcpu"].dump() + " IP:").c_str(),
             text_of(v["ip"]) + (v["symbol"].is_null() ? "" : " <" + text_of(v["symbol"]) + ">"));
    if (const auto& log = k["log"]; !log.is_null()) {
        if (!log["error"].is_null()) {
            line("Kernel log:", "not readable: " + text_of(log["error"]));
            return;
        }
        line("Kernel log:", text_of(log["records"]) + " records" + (log["partial"].get<bool>() ? " (partial)" : "") +
                                " (xen-dumpctl dmesg)");
        if (log["crash_reports"].empty()) line("Crash report:", "none in the log");
        for (const auto& c : log["crash_reports"]) line("Crash report:", dmesg_text_of(c["line"]));
    }
    if (const auto& bt = k["crash_backtrace"]; !bt.is_null()) {
        line("Crash VCPU:", bt["vcpu"].dump() + ", backtrace by " + text_of(bt["method"]) + " (xen-dumpctl backtrace):");
        size_t i = 0;
        for (const auto& f : bt["frames"])
            std::printf("  #%-2zu %s%s\n", i++, f["reliable"].get<bool>() ? "" : "? ",
                        f["symbol"].is_null() ? text_of(f["ip"]).c_str() : text_of(f["symbol"]).c_str());
        if (!bt["user_ip"].is_null()) std::printf("      (user space at %s)\n", text_of(bt["user_ip"]).c_str());
        if (bt["partial"].get<bool>()) std::printf("      (partial: %s)\n", text_of(bt["stopped"]).c_str());
    }
}

// An encrypted dump without an identity (xen-dumpctl(1) "ENCRYPTED DUMPS"):
// what its age header says and, when it has one, its sidecar's clear
// metadata (the service writes it beside the dump: sidecar.hpp).
nlohmann::json describe_locked(const std::filesystem::path& path, const EncryptionInfo& e) {
    nlohmann::json j;
    j["file"] = path.string();
    j["encrypted"] = {{"format", "age"}, {"recipients", e.recipient_types.size()}, {"types", e.recipient_types}};
    j["file_size"] = e.file_size;
    j["readable"] = false;
    j["sidecar"] = nullptr;
    std::error_code ec;
    const auto sc = daemon::sidecar_path(path);
    // A dump in the store: its sidecar's object beside it (the uploader's layout).
    const bool stored = s3::is_url(path.string());
    if (stored || std::filesystem::exists(sc, ec)) {
        try {
            const daemon::Sidecar s = stored ? store_sidecar(sc.string()) : daemon::read_sidecar(sc);
            j["sidecar"] = {{"domain", s.domain_name}, {"domid", s.domid},   {"uuid", s.uuid},     {"type", s.type},
                            {"reason", s.reason},      {"pages", s.pages},   {"format", s.format},
                            {"start_time", s.start_time}, {"result", daemon::to_string(s.result)}};
        } catch (const Error& err) {
            j["sidecar_error"] = err.what();
        }
    }
    return j;
}

void print_locked(const nlohmann::json& j, const EncryptionInfo& e, bool utc) {
    auto line = [](const char* label, const std::string& value) { std::printf("%-13s %s\n", label, value.c_str()); };
    line("File:", text_of(j["file"]));
    line("Encrypted:", describe_encryption(e).substr(std::string_view("encrypted ").size()));
    if (const auto& s = j["sidecar"]; !s.is_null()) {
        line("Domain:", text_of(s["domid"]) + " (" + text_of(s["domain"]) + ")");
        line("UUID:", text_of(s["uuid"]));
        line("Type:", text_of(s["type"]));
        line("Format:", text_of(s["format"]));
        line("Pages:", text_of(s["pages"]));
        line("Reason:", text_of(s["reason"]));
        line("Time:", shown_time(s["start_time"].get<int64_t>(), utc ? Zone::utc : Zone::local));
        line("Result:", text_of(s["result"]));
    } else {
        line("Sidecar:", j.contains("sidecar_error") ? "unreadable: " + text_of(j["sidecar_error"]) : "none");
    }
    line("Contents:", "need a key: give an identity with -i FILE (or $XEN_DUMP_IDENTITY)");
}

}  // namespace

int cmd_info(Invocation& c) {
    if (c.locked) {
        const auto j = describe_locked(c.dump_path, *c.locked);
        if (c.json)
            print_json(j, c.json);
        else
            print_locked(j, *c.locked, c.selection.utc);
        return cli::kExitOk;
    }
    auto j = describe(*c.dump);
    // An encrypted dump read with its key says so (and nothing more differs).
    if (const auto e = c.dump->encryption())
        j["encrypted"] = {{"format", "age"}, {"recipients", e->recipient_types.size()}, {"types", e->recipient_types}};
    // A flattened file (makedumpfile -F) is read as the file it carries.
    if (const auto f = c.dump->flattened())
        j["flattened"] = {{"records", f->records}, {"stored_size", f->stored_size}};
    // A dump in the store: what everything above cost in ranged GETs.
    if (const auto s = c.dump->store())
        j["store"] = {{"object", s->object},
                      {"object_size", s->object_size},
                      {"block_size", s->block_size},
                      {"requests", s->requests},
                      {"bytes_fetched", s->bytes_fetched}};
    if (c.json)
        print_json(j, c.json);
    else
        print_text(j);
    return cli::kExitOk;
}

}  // namespace xendump::ctl
