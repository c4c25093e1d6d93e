#include "xendump/format.hpp"

#include "xendump/error.hpp"

namespace xendump::format {

std::string_view to_string(GuestType t) {
    switch (t) {
    case GuestType::pv: return "pv";
    case GuestType::hvm: return "hvm";
    case GuestType::pvh: return "pvh";
    }
    return "?";
}

GuestType guest_type_from_string(std::string_view s) {
    if (s == "pv") return GuestType::pv;
    if (s == "hvm") return GuestType::hvm;
    if (s == "pvh") return GuestType::pvh;
    throw Error("unknown guest type '" + std::string(s) + "' (expected pv, hvm or pvh)");
}

std::string_view to_string(P2mKind k) {
    switch (k) {
    case P2mKind::tree: return "tree";
    case P2mKind::linear: return "linear";
    case P2mKind::translated: return "translated";
    case P2mKind::file: return "file";
    }
    return "?";
}

std::string_view to_string(Reason r) {
    switch (r) {
    case Reason::crash: return "crash";
    case Reason::request: return "request";
    case Reason::watchdog: return "watchdog";
    case Reason::convert: return "convert";
    }
    return "?";
}

}  // namespace xendump::format
