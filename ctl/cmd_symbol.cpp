// xen-dumpctl symbol [--json[=short|pretty]] FILE NAME|ADDRESS: the guest kernel's symbols
// from the kallsyms tables found in the dump's pages (no vmlinux needed).
// xen-dumpctl symbol --list FILE: the whole table, as /proc/kallsyms shows it.
// NAME may carry or omit the per_cpu__ prefix of per-cpu variables (as
// crash accepts both); ADDRESS (hex, 0x optional) gives symbol+offset.
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "encrypted.hpp"
#include "guest_kernel.hpp"
#include "options.hpp"
#include "util/util.hpp"
#include "xendump/reader.hpp"
#include "xendump/text.hpp"

namespace xendump::ctl {

namespace {

std::optional<uint64_t> parse_address(std::string_view s) {
    if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
    if (s.empty() || s.size() > 16) return std::nullopt;
    uint64_t v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v, 16);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
    return v;
}

std::string hex(uint64_t v) { return util::hex(v, 16); }

}  // namespace

int cmd_symbol(Invocation& c) {
    const ParsedArgs& p = c.p;
    const bool list = p.has("--list");
    if (list && (p.operands.size() != 1 || p.has("--json")))
        return c.usage("--list takes one FILE and no --json");
    if (!list && p.operands.size() != 2) return c.usage("expected FILE and NAME or ADDRESS");
    auto reader = open_dump(p.operands[0], c.open);
    const DumpKernel k = find_dump_kernel(reader);
    if (!k.kallsyms) {
        std::fprintf(stderr, "xen-dumpctl symbol: %s: no Linux kernel symbol table found in the dump\n",
                     p.operands[0].c_str());
        return cli::kExitFailure;
    }
    if (list) {
        for (const kernel::KernelSymbol& s : k.kallsyms->table.symbols())
            std::printf("%016llx %c %s\n", static_cast<unsigned long long>(s.address), s.type,
                        escape_text(s.name).c_str());  // the guest's text (xendump/text.hpp)
        return cli::kExitOk;
    }
    const std::string& query = p.operands[1];
    nlohmann::json j;
    j["query"] = query;
    // A name first: many symbol names are also valid hex ("add", "cafe").
    if (const kernel::KernelSymbol* s = k.kallsyms->table.find(query)) {
        j["name"] = s->name;
        j["address"] = hex(s->address);
        j["type"] = std::string(1, s->type);
        if (c.json)
            print_json(j, c.json);
        else
            std::printf("%s %c %s\n", hex(s->address).c_str(), s->type, escape_text(s->name).c_str());
        return cli::kExitOk;
    }
    if (auto addr = parse_address(query)) {
        if (auto sym = k.symbolize(*addr)) {
            j["address"] = hex(*addr);
            j["symbol"] = *sym;
            if (c.json)
                print_json(j, c.json);
            else
                std::printf("%s %s\n", hex(*addr).c_str(), escape_text(*sym).c_str());
            return cli::kExitOk;
        }
        std::fprintf(stderr, "xen-dumpctl symbol: %s is not inside the kernel image\n", hex(*addr).c_str());
        return cli::kExitFailure;
    }
    std::fprintf(stderr, "xen-dumpctl symbol: no symbol named '%s'\n", escape_text(query).c_str());
    return cli::kExitFailure;
}

}  // namespace xendump::ctl
