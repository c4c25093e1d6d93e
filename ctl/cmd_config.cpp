// xen-dumpctl config [--json]: the service's configuration as it is merged
// from /etc/xen-dumpd.conf, its drop-ins and the command line, each value
// with where it came from (FILE:LINE, the command line, or the default), as
// `kdump-config show` shows kdump's. Keys a file sets last win; Recipient=
// and RecipientsFile= add up until an empty value empties the list.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "config.hpp"
#include "options.hpp"
#include "service_options.hpp"
#include "xendump/text.hpp"

namespace xendump::ctl {

namespace {

struct Shown {
    std::string section, key, value, origin;
    std::string meaning{};  // a default's, "" otherwise
    bool is_default = false;
};

bool is_list_key(const std::string& key) { return key == "Recipient" || key == "RecipientsFile"; }

// The lines of `section` that hold: the last of each key; for the
// recipients, every line since the last empty one (which empties the list).
std::vector<const daemon::ConfigLine*> effective(const daemon::Config& config, const std::string& section,
                                                 const std::string& key) {
    std::vector<const daemon::ConfigLine*> out;
    for (const auto& l : config.lines) {
        if (l.section != section) continue;
        if (is_list_key(key) && is_list_key(l.key)) {
            if (l.value.empty()) out.clear();
            if (l.key == key || l.value.empty()) out.push_back(&l);
            continue;
        }
        if (l.key != key) continue;
        out.assign(1, &l);
    }
    // The empty line that emptied the list stays only if nothing followed it.
    if (out.size() > 1 && out.front()->value.empty()) out.erase(out.begin());
    if (!out.empty() && out.front()->key != key) out.clear();
    return out;
}

std::vector<Shown> settings(const ServiceArgs& sa) {
    const daemon::Config& config = sa.config;
    std::vector<Shown> out;
    for (const auto& d : daemon::key_defaults()) {
        // The command line overrides the files (xen-dumpctl --dump-dir, --socket).
        if (d.key == "DumpDir" && sa.overrides.dump_dir) {
            out.push_back({"Dump", d.key, config.dump_dir.string(), "command line (--dump-dir)"});
            continue;
        }
        if (d.key == "ControlSocket" && sa.overrides.control_socket) {
            out.push_back({"Dump", d.key, config.control_socket.string(), "command line (--socket)"});
            continue;
        }
        const auto lines = effective(config, d.section, d.key);
        if (lines.empty())
            out.push_back({d.section, d.key, d.value, "default", d.meaning, true});
        for (const auto* l : lines) out.push_back({d.section, l->key, l->value, l->origin});
    }
    for (const auto& [name, keys] : config.domain_formats) {
        const std::string section = "Domain " + name;
        for (const auto& d : daemon::key_defaults()) {
            if (!d.per_domain) continue;
            for (const auto* l : effective(config, section, d.key)) out.push_back({section, l->key, l->value, l->origin});
        }
    }
    return out;
}

}  // namespace

int cmd_config(Invocation& c) {
    if (!c.p.operands.empty()) return c.usage("no operands expected");
    const auto shown = settings(c.service);
    const auto& files = c.service.config.files;
    if (c.json) {
        nlohmann::ordered_json j;
        j["files"] = files;
        j["settings"] = nlohmann::ordered_json::array();
        for (const auto& s : shown) {
            nlohmann::ordered_json e = {{"section", s.section}, {"key", s.key}, {"value", s.value},
                                        {"origin", s.origin}, {"default", s.is_default}};
            if (!s.meaning.empty()) e["meaning"] = s.meaning;
            j["settings"].push_back(e);
        }
        print_json(j, c.json);
        return cli::kExitOk;
    }
    if (files.empty()) std::printf("# no configuration file (%s is absent): the defaults\n", c.service.config_file.c_str());
    for (const auto& f : files) std::printf("# %s\n", escape_text(f).c_str());
    std::string section;
    for (const auto& s : shown) {
        if (s.section != section) {
            std::printf("%s[%s]\n", section.empty() ? "" : "\n", escape_text(s.section).c_str());
            section = s.section;
        }
        const std::string line = s.key + "=" + escape_text(s.value);
        const std::string where = s.is_default && !s.meaning.empty() ? "default: " + s.meaning : s.origin;
        std::printf("%-40s # %s\n", line.c_str(), escape_text(where).c_str());
    }
    return cli::kExitOk;
}

}  // namespace xendump::ctl
