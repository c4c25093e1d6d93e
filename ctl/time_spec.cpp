#include "time_spec.hpp"

#include <cctype>
#include <charconv>
#include <chrono>
#include <ctime>
#include <optional>
#include <string>

#include "xendump/error.hpp"

namespace xendump::ctl {

namespace {

constexpr int64_t kDay = 86400;

// Unix seconds of a wall-clock time in `zone`: timegm(3) for UTC, mktime(3)
// (the TZ rules, daylight saving decided by them) for local time.
int64_t wall_clock(std::chrono::year_month_day day, unsigned h, unsigned mi, unsigned sec, Zone zone) {
    std::tm tm{};
    tm.tm_year = static_cast<int>(day.year()) - 1900;
    tm.tm_mon = static_cast<int>(static_cast<unsigned>(day.month())) - 1;
    tm.tm_mday = static_cast<int>(static_cast<unsigned>(day.day()));
    tm.tm_hour = static_cast<int>(h);
    tm.tm_min = static_cast<int>(mi);
    tm.tm_sec = static_cast<int>(sec);
    tm.tm_isdst = -1;
    return zone == Zone::utc ? ::timegm(&tm) : ::mktime(&tm);
}

// Midnight of the day that holds `t`, in `zone`.
int64_t midnight(int64_t t, Zone zone) {
    const std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm{};
    if (zone == Zone::utc) ::gmtime_r(&tt, &tm);
    else ::localtime_r(&tt, &tm);
    const std::chrono::year_month_day day{std::chrono::year(tm.tm_year + 1900),
                                          std::chrono::month(static_cast<unsigned>(tm.tm_mon + 1)),
                                          std::chrono::day(static_cast<unsigned>(tm.tm_mday))};
    return wall_clock(day, 0, 0, 0, zone);
}

// The same day `days` later, at midnight (a day of 23 or 25 hours when
// daylight saving changes in between).
int64_t midnight_after(int64_t t, int days, Zone zone) { return midnight(midnight(t, zone) + days * kDay + kDay / 2, zone); }

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// Exactly `n` digits at s[pos].
bool digits(std::string_view s, size_t pos, size_t n, unsigned& out) {
    if (pos + n > s.size()) return false;
    out = 0;
    for (size_t i = pos; i < pos + n; ++i) {
        if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
        out = out * 10 + static_cast<unsigned>(s[i] - '0');
    }
    return true;
}

// YYYY-MM-DD[( |T)HH:MM[:SS]][Z| UTC|+00:00], in `zone` unless it says UTC.
std::optional<int64_t> absolute(std::string_view s, Zone zone) {
    unsigned y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
    if (!digits(s, 0, 4, y) || s.size() < 10 || s[4] != '-' || !digits(s, 5, 2, mo) || s[7] != '-' ||
        !digits(s, 8, 2, d))
        return std::nullopt;
    const std::chrono::year_month_day day{std::chrono::year(static_cast<int>(y)), std::chrono::month(mo),
                                          std::chrono::day(d)};
    if (!day.ok()) return std::nullopt;
    std::string_view rest = s.substr(10);
    if (!rest.empty() && (rest[0] == ' ' || rest[0] == 'T')) {
        if (!digits(rest, 1, 2, h) || rest.size() < 6 || rest[3] != ':' || !digits(rest, 4, 2, mi))
            return std::nullopt;
        rest.remove_prefix(6);
        if (!rest.empty() && rest[0] == ':') {
            if (!digits(rest, 1, 2, sec)) return std::nullopt;
            rest.remove_prefix(3);
        }
        if (h > 23 || mi > 59 || sec > 60) return std::nullopt;
    }
    rest = trim(rest);
    if (!rest.empty() && rest != "Z" && rest != "UTC" && rest != "+00:00") return std::nullopt;
    return wall_clock(day, h, mi, sec, rest.empty() ? zone : Zone::utc);
}

std::optional<int64_t> unit_seconds(std::string_view u) {
    static constexpr std::pair<std::string_view, int64_t> kUnits[] = {
        {"s", 1},       {"sec", 1},       {"secs", 1},      {"second", 1},  {"seconds", 1},
        {"m", 60},      {"min", 60},      {"mins", 60},     {"minute", 60}, {"minutes", 60},
        {"h", 3600},    {"hr", 3600},     {"hour", 3600},   {"hours", 3600},
        {"d", kDay},    {"day", kDay},    {"days", kDay},
        {"w", 7 * kDay}, {"week", 7 * kDay}, {"weeks", 7 * kDay},
    };
    for (const auto& [name, secs] : kUnits)
        if (name == u) return secs;
    return std::nullopt;
}

// "2h 30min", "90s", "1d": a sum of NUMBER UNIT terms (spaces allowed between).
std::optional<int64_t> span(std::string_view s) {
    s = trim(s);
    if (s.empty()) return std::nullopt;
    int64_t total = 0;
    while (!s.empty()) {
        int64_t n = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (ec != std::errc() || n < 0 || n > (int64_t{1} << 40)) return std::nullopt;
        s.remove_prefix(static_cast<size_t>(p - s.data()));
        s = trim(s);
        size_t len = 0;
        while (len < s.size() && std::isalpha(static_cast<unsigned char>(s[len]))) ++len;
        auto unit = unit_seconds(s.substr(0, len));
        if (!unit) return std::nullopt;
        total += n * *unit;
        s = trim(s.substr(len));
    }
    return total;
}

}  // namespace

int64_t parse_time_spec(std::string_view text, int64_t now, Zone zone) {
    const std::string_view s = trim(text);
    auto fail = [&]() -> Error {
        return Error("not a time: '" + std::string(text) +
                     "' (expected YYYY-MM-DD [HH:MM[:SS]] [UTC], @SECONDS, now, today, yesterday, tomorrow, "
                     "or a relative time such as -2h, -30min, -1d, \"2h ago\")");
    };
    if (s == "now") return now;
    if (s == "today") return midnight(now, zone);
    if (s == "yesterday") return midnight_after(now, -1, zone);
    if (s == "tomorrow") return midnight_after(now, 1, zone);
    if (s.starts_with('@')) {
        int64_t v = 0;
        auto [p, ec] = std::from_chars(s.data() + 1, s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size() || s.size() == 1) throw fail();
        return v;
    }
    if (s.starts_with('-') || s.starts_with('+')) {
        auto d = span(s.substr(1));
        if (!d) throw fail();
        return s[0] == '-' ? now - *d : now + *d;
    }
    if (s.ends_with(" ago")) {
        auto d = span(s.substr(0, s.size() - 4));
        if (!d) throw fail();
        return now - *d;
    }
    if (auto t = absolute(s, zone)) return *t;
    throw fail();
}

std::string shown_time(int64_t t, Zone zone) {
    const auto when = static_cast<std::time_t>(t);
    std::tm tm{};
    if (zone == Zone::utc) gmtime_r(&when, &tm);
    else localtime_r(&when, &tm);
    char buf[64];
    const size_t n = std::strftime(buf, sizeof buf, zone == Zone::utc ? "%Y-%m-%d %H:%M:%S UTC" : "%Y-%m-%d %H:%M:%S %Z", &tm);
    return std::string(buf, n);
}

}  // namespace xendump::ctl
