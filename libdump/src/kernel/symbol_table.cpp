// Name and address lookups over a decoded kernel symbol list.
#include "xendump/kernel/kallsyms.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>

#include "xendump/error.hpp"

namespace xendump::kernel {
namespace {

constexpr std::string_view kPerCpuPrefix = "per_cpu__";

bool is_global(char type) { return std::isupper(static_cast<unsigned char>(type)) != 0; }

}  // namespace

SymbolTable::SymbolTable(std::vector<KernelSymbol> symbols) : symbols_(std::move(symbols)) {
    if (symbols_.size() > UINT32_MAX) throw Error("too many kernel symbols", std::to_string(symbols_.size()));
    by_name_.resize(symbols_.size());
    by_address_.resize(symbols_.size());
    for (uint32_t i = 0; i < symbols_.size(); ++i) by_name_[i] = by_address_[i] = i;
    // Of equal names, a global symbol first, then kallsyms order: find()
    // takes the first.
    std::sort(by_name_.begin(), by_name_.end(), [this](uint32_t a, uint32_t b) {
        const KernelSymbol &x = symbols_[a], &y = symbols_[b];
        if (const int c = x.name.compare(y.name); c != 0) return c < 0;
        if (is_global(x.type) != is_global(y.type)) return is_global(x.type);
        return a < b;
    });
    std::stable_sort(by_address_.begin(), by_address_.end(), [this](uint32_t a, uint32_t b) {
        return symbols_[a].address < symbols_[b].address;
    });
}

const KernelSymbol* SymbolTable::find(std::string_view name) const {
    auto exact = [this](std::string_view n) -> const KernelSymbol* {
        auto it = std::lower_bound(by_name_.begin(), by_name_.end(), n,
                                   [this](uint32_t i, std::string_view v) { return symbols_[i].name < v; });
        return it == by_name_.end() || symbols_[*it].name != n ? nullptr : &symbols_[*it];
    };
    if (const KernelSymbol* s = exact(name)) return s;
    // The per_cpu__ alias only for symbols inside the per-cpu section, when
    // the kernel tells where it is.
    const KernelSymbol* alias = name.starts_with(kPerCpuPrefix)
                                    ? exact(name.substr(kPerCpuPrefix.size()))
                                    : exact(std::string(kPerCpuPrefix) + std::string(name));
    if (alias == nullptr) return nullptr;
    const KernelSymbol* start = exact("__per_cpu_start");
    const KernelSymbol* end = exact("__per_cpu_end");
    if (start != nullptr && end != nullptr &&
        (alias->address < start->address || alias->address >= end->address))
        return nullptr;
    return alias;
}

std::optional<uint64_t> SymbolTable::address(std::string_view name) const {
    const KernelSymbol* s = find(name);
    if (s == nullptr) return std::nullopt;
    return s->address;
}

std::optional<SymbolTable::Resolved> SymbolTable::resolve(uint64_t address) const {
    auto it = std::upper_bound(by_address_.begin(), by_address_.end(), address,
                               [this](uint64_t a, size_t i) { return a < symbols_[i].address; });
    if (it == by_address_.begin()) return std::nullopt;
    // Of symbols sharing that address, the first in kallsyms order, as the
    // kernel's own lookup picks it (kernel/kallsyms.c get_symbol_pos: the
    // table is sorted with section markers such as __cpuidle_text_start,
    // whose names start with more underscores, after the function).
    // by_address_ is sorted stably, so that is the first of their equal
    // range (found by bisection: a guest's table may put millions of
    // symbols at one address).
    const uint64_t at = symbols_[*(it - 1)].address;
    it = std::lower_bound(by_address_.begin(), it, at,
                          [this](uint32_t i, uint64_t a) { return symbols_[i].address < a; });
    const KernelSymbol& s = symbols_[*it];
    return Resolved{&s, address - s.address};
}

std::string SymbolTable::describe(uint64_t address) const {
    char buf[40];
    auto r = resolve(address);
    if (!r) {
        std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(address));
        return buf;
    }
    if (r->offset == 0) return r->symbol->name;
    std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(r->offset));
    return r->symbol->name + buf;
}

}  // namespace xendump::kernel
