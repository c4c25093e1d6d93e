// The times of -S/--since and -U/--until (xen-dumpctl list, info, verify,
// dmesg, debug), a subset of systemd.time(7)'s syntax, in local time (the TZ
// rules, as date(1) and journalctl read times) or, with --utc, in UTC, unless a
// zone is stated (only "Z", "UTC" and "+00:00" are):
//   YYYY-MM-DD                      midnight of that day
//   YYYY-MM-DD HH:MM[:SS]           also with 'T' between, and "Z"/" UTC" after
//   @SECONDS                        seconds since the epoch
//   now, today, yesterday, tomorrow (today = midnight of the current day,
//                                   local or UTC as the times are read)
//   -2h, +30min, "-1d 6h", "2h ago" relative to now; units: s sec
//   second(s), m min minute(s), h hr hour(s), d day(s), w week(s)
// libsystemd has no public parser for this syntax (parse_timestamp() is
// internal to systemd), hence this one; the calendar is <chrono>'s
// (year_month_day) and libc's (timegm, mktime).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace xendump::ctl {

// How a time without a zone is read.
enum class Zone { local, utc };

// Unix seconds of `text`, with `now` (unix seconds) for the relative forms.
// Throws Error naming the text on anything else.
int64_t parse_time_spec(std::string_view text, int64_t now, Zone zone = Zone::local);

// A time as list and info show it, the way -S/-U read times: local time
// with the zone's abbreviation ("2026-12-03 13:05:00 CET", as coredumpctl
// shows times), or in UTC ("... UTC").
std::string shown_time(int64_t t, Zone zone);

}  // namespace xendump::ctl
