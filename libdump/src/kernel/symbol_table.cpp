// Name and address lookups over a decoded kernel symbol list.
#include "xendump/kernel/kallsyms.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace xendump::kernel {
namespace {

constexpr std::string_view kPerCpuPrefix = "per_cpu__";

bool is_global(char type) { return std::isupper(static_cast<unsigned char>(type)) != 0; }

}  // namespace

SymbolTable::SymbolTable(std::vector<KernelSymbol> symbols) : symbols_(std::move(symbols)) {
    by_name_.reserve(symbols_.size());
    by_address_.resize(symbols_.size());
    for (size_t i = 0; i < symbols_.size(); ++i) {
        by_address_[i] = i;
        auto [it, inserted] = by_name_.emplace(symbols_[i].name, i);
        if (!inserted && !is_global(symbols_[it->second].type) && is_global(symbols_[i].type))
            it->second = i;
    }
    std::stable_sort(by_address_.begin(), by_address_.end(), [this](size_t a, size_t b) {
        return symbols_[a].address < symbols_[b].address;
    });
}

const KernelSymbol* SymbolTable::find(std::string_view name) const {
    auto exact = [this](std::string_view n) -> const KernelSymbol* {
        auto it = by_name_.find(std::string(n));
        return it == by_name_.end() ? nullptr : &symbols_[it->second];
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
    --it;
    const uint64_t at = symbols_[*it].address;
    while (it != by_address_.begin() && symbols_[*(it - 1)].address == at) --it;
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
