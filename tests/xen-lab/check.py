#!/usr/bin/python3
"""The lab's verdict: compares what dom0 sent back and prints the summary.

For each guest, xl's `xl dump-core` file and our xen-dumpd file are read
through their Xen dump-core sections (both formats have them: xen-dump-core(5) "Sections"), and
must hold the same pfns, the same gmfns (PV), byte-identical pages and equal
vcpu contexts. Our file must pass `xen-dumpctl verify`; xl's file converted by
`xen-dump-convert` must verify and hold the same pages. The crash guest must
have been dumped by the service on its own. Exit status 0 only if all holds.
Only the standard library: this runs on a bare CI host."""

import argparse
import json
import mmap
import os
import re
import shutil
import struct
import subprocess
import sys

PAGE = 4096
NOTE_DUMPCORE_HEADER = 0x2000001
# Guests whose failure to boot is a finding to report, not a failed test:
# Linux dropped 32-bit PV guest support in 5.9 (Debian 12's 686-pae kernel has
# XEN_PVH but no XEN_PV), so pv32 is tried and its outcome recorded.
MAY_NOT_BOOT = {"pv32"}
NOTES = []
# Per guest: (xen-dumpd's seconds, pages in its dump), for the line of dump
# time per page that puts PV, PVH and HVM side by side (issue 36: an HVM or
# PVH dump found its pages by mapping every gfn, twice PV's work per page).
DUMP_TIMES = {}


class DumpFile:
    """The Xen dump-core view of an ELF core: sections by name (ELF gABI
    section header table; Xen's docs/misc/dump-core-format.txt)."""

    def __init__(self, path):
        self.path = path
        self._file = open(path, "rb")
        self.data = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        ident = self.data[:16]
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            raise ValueError(f"{path}: not a little-endian ELF64 file")
        (self.e_type, self.e_machine, _, _, _, shoff, _, _, _, _, shentsize, shnum,
         shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", self.data, 16)
        headers = [struct.unpack_from("<IIQQQQIIQQ", self.data, shoff + i * shentsize) for i in range(shnum)]
        names_off, names_size = headers[shstrndx][4], headers[shstrndx][5]
        names = self.data[names_off:names_off + names_size]
        self.sections = {}
        for h in headers:
            name = names[h[0]:names.index(b"\0", h[0])].decode()
            self.sections[name] = {"offset": h[4], "size": h[5], "entsize": h[9]}
        if self.sections[".xen_pages"]["offset"] + self.sections[".xen_pages"]["size"] > len(self.data):
            raise ValueError(f"{path}: .xen_pages runs past the end of the file")
        self.header = self._header_note()
        self.pfns, self.gmfns = self._table()
        self.index = {pfn: i for i, pfn in enumerate(self.pfns)}

    def section(self, name):
        s = self.sections.get(name)
        return None if s is None else self.data[s["offset"]:s["offset"] + s["size"]]

    def _header_note(self):
        notes = self.section(".note.Xen") or b""
        pos = 0
        while pos + 12 <= len(notes):
            namesz, descsz, ntype = struct.unpack_from("<III", notes, pos)
            desc = pos + 12 + ((namesz + 3) & ~3)
            if ntype == NOTE_DUMPCORE_HEADER:
                magic, vcpus, pages, page_size = struct.unpack_from("<QQQQ", notes, desc)
                return {"magic": magic, "nr_vcpus": vcpus, "nr_pages": pages, "page_size": page_size}
            pos = desc + ((descsz + 3) & ~3)
        raise ValueError(f"{self.path}: no DUMPCORE_HEADER note in .note.Xen")

    def _table(self):
        p2m = self.section(".xen_p2m")
        if p2m is not None:
            pairs = list(struct.iter_unpack("<QQ", p2m))
            return [p for p, _ in pairs], [g for _, g in pairs]
        pfn = self.section(".xen_pfn")
        if pfn is None:
            raise ValueError(f"{self.path}: neither .xen_p2m nor .xen_pfn")
        pfns = [p for (p,) in struct.iter_unpack("<Q", pfn)]
        # xl dump-core sizes .xen_pfn and .xen_pages by the domain's page count
        # before it probes the gfns; slots it did not fill stay ~0 at the end
        # (their pages are zeros). Xen's readers stop at them; so do we, and
        # say so.
        unused = 0
        while pfns and pfns[-1] == 0xFFFFFFFFFFFFFFFF:
            pfns.pop()
            unused += 1
        if unused:
            NOTES.append(f"{os.path.basename(self.path)}: {unused} unused trailing .xen_pfn slot(s) (~0) ignored")
        return pfns, None

    def page(self, pfn):
        start = self.sections[".xen_pages"]["offset"] + self.index[pfn] * PAGE
        return self.data[start:start + PAGE]

    def vcpu_contexts(self):
        s = self.sections.get(".xen_prstatus")
        if s is None or s["size"] == 0:
            return []
        size = s["entsize"] or s["size"] // max(1, self.header["nr_vcpus"])
        blob = self.section(".xen_prstatus")
        return [blob[i:i + size] for i in range(0, len(blob), size)]


def ranges(pfns):
    """'0x0-0x9f,0x100-0x7fff': sorted pfns as compact ranges."""
    out, pfns = [], sorted(pfns)
    i = 0
    while i < len(pfns):
        j = i
        while j + 1 < len(pfns) and pfns[j + 1] == pfns[j] + 1:
            j += 1
        out.append(f"{pfns[i]:#x}" if i == j else f"{pfns[i]:#x}-{pfns[j]:#x}")
        i = j + 1
    text = ",".join(out)
    return text if len(text) < 300 else text[:300] + "..."


def first_difference(a, b):
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare(reference, candidate, problems, label, contexts=True):
    """Appends to problems what differs between two dumps of one guest and
    returns (pages compared, pages equal)."""
    ref_set, cand_set = set(reference.pfns), set(candidate.pfns)
    if ref_set != cand_set:
        only_ref, only_cand = ref_set - cand_set, cand_set - ref_set
        if only_ref:
            problems.append(f"{label}: {len(only_ref)} pfns only in {os.path.basename(reference.path)}: {ranges(only_ref)}")
        if only_cand:
            problems.append(f"{label}: {len(only_cand)} pfns only in {os.path.basename(candidate.path)}: "
                            f"{ranges(only_cand)}")
    if reference.gmfns is not None or candidate.gmfns is not None:
        if reference.gmfns is None or candidate.gmfns is None:
            problems.append(f"{label}: only one file has a pfn->gmfn table (.xen_p2m)")
        else:
            ref_map = dict(zip(reference.pfns, reference.gmfns))
            cand_map = dict(zip(candidate.pfns, candidate.gmfns))
            wrong = [p for p in ref_set & cand_set if ref_map[p] != cand_map[p]]
            if wrong:
                problems.append(f"{label}: {len(wrong)} pfns with another gmfn, e.g. pfn {min(wrong):#x}: "
                                f"{ref_map[min(wrong)]:#x} vs {cand_map[min(wrong)]:#x}")
    if reference.header["magic"] != candidate.header["magic"]:
        problems.append(f"{label}: header magic {reference.header['magic']:#x} vs {candidate.header['magic']:#x}")
    common = sorted(ref_set & cand_set)
    differing = [p for p in common if reference.page(p) != candidate.page(p)]
    if differing:
        p = differing[0]
        off = first_difference(reference.page(p), candidate.page(p))
        problems.append(f"{label}: {len(differing)} of {len(common)} pages differ: {ranges(differing)} "
                        f"(pfn {p:#x} first differs at byte {off})")
    if contexts:
        ref_ctx, cand_ctx = reference.vcpu_contexts(), candidate.vcpu_contexts()
        if len(ref_ctx) != len(cand_ctx):
            problems.append(f"{label}: {len(ref_ctx)} vs {len(cand_ctx)} vcpu contexts")
        for vcpu, (a, b) in enumerate(zip(ref_ctx, cand_ctx)):
            off = first_difference(a, b)
            if off is not None:
                problems.append(f"{label}: vcpu {vcpu} context differs at byte {off} "
                                f"(sizes {len(a)} and {len(b)})")
    return len(common), len(common) - len(differing)


def run(argv, log):
    with open(log, "w") as f:
        return subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT).returncode


def tail(path, lines=5):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).strip()
    except OSError:
        return "(no log)"


def read_env(path):
    values = {}
    if os.path.exists(path):
        for line in open(path, errors="replace"):
            key, sep, value = line.strip().partition("=")
            if sep:
                values[key] = value
    return values


def seconds(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def check_guest(name, args, env, tools):
    """One row of the table and the list of problems for one guest."""
    out = args.out
    row = {"guest": name}
    problems = []
    ours_path, xl_path = os.path.join(out, f"{name}.xdump"), os.path.join(out, f"{name}.xl.core")
    row["ours s"] = env.get(f"{name}.dumpd.secs", "-")
    row["xl s"] = env.get(f"{name}.xl.secs", "-")
    ours_s, xl_s = seconds(env.get(f"{name}.dumpd.secs")), seconds(env.get(f"{name}.xl.secs"))
    row["xl/ours"] = f"{xl_s / ours_s:.1f}x" if ours_s and xl_s else "-"
    if env.get(f"{name}.create.rc") is None:
        return row, [f"{name}: dom0 never got to this guest"]
    if f"{name}.ready.secs" not in env and name in MAY_NOT_BOOT:
        row["pages"] = "no boot"
        NOTES.append(f"{name}: did not boot (xl create rc {env.get(name + '.create.rc')}): "
                     f"{tail(os.path.join(out, name + '-create.log'), 3)}")
        return row, []
    if f"{name}.ready.secs" not in env:
        return row, [f"{name}: guest did not boot (xl create rc {env.get(name + '.create.rc')}): "
                     f"{tail(os.path.join(out, name + '-create.log'))}"]
    if env.get(f"{name}.dumpd.rc") != "0":
        problems.append(f"{name}: xen-dumpd rc {env.get(name + '.dumpd.rc', 'not run')}: "
                        f"{tail(os.path.join(out, name + '-dumpd.log'))}")
    xl_wanted = args.xl == "1" or name in args.xl.split("+")
    if xl_wanted and env.get(f"{name}.xl.rc") != "0":
        problems.append(f"{name}: xl dump-core rc {env.get(name + '.xl.rc')}: {tail(os.path.join(out, name + '-xl.log'))}")
    ours = DumpFile(ours_path) if os.path.exists(ours_path) else None
    xl = DumpFile(xl_path) if os.path.exists(xl_path) else None
    row["pages"] = str(len(ours.pfns)) if ours else "-"
    if ours and ours.pfns and ours_s:
        DUMP_TIMES[name] = (ours_s, len(ours.pfns))
    if ours:
        rc = run([tools["xen-dumpctl"], "verify", ours_path], os.path.join(out, f"{name}-verify.log"))
        row["verify"] = "ok" if rc == 0 else f"FAIL({rc})"
        if rc != 0:
            problems.append(f"{name}: xen-dumpctl verify rc {rc}: {tail(os.path.join(out, name + '-verify.log'))}")
        k = check_kernel(name, ours_path, tools, out, row, problems)
        check_compact(name, ours, k, tools, out, row, problems)
    if ours and xl:
        compared, equal = compare(xl, ours, problems, f"{name} xl vs ours")
        row["equal/compared"] = f"{equal}/{compared}"
    if xl:
        converted = os.path.join(out, f"{name}.converted.xdump")
        log = os.path.join(out, f"{name}-convert.log")
        if not os.path.exists(tools["xen-dump-convert"]):
            row["convert"] = "missing"
            problems.append(f"{name}: xen-dump-convert was not built")
        elif run([tools["xen-dump-convert"], xl_path, "-o", converted], log) != 0:
            row["convert"] = "FAIL"
            problems.append(f"{name}: xen-dump-convert failed: {tail(log)}")
        else:
            vrc = run([tools["xen-dumpctl"], "verify", converted], os.path.join(out, f"{name}-convert-verify.log"))
            before = len(problems)
            compared, equal = compare(xl, DumpFile(converted), problems, f"{name} xl vs converted")
            ok = vrc == 0 and len(problems) == before
            row["convert"] = f"ok ({equal} pages)" if ok else "FAIL"
            if vrc != 0:
                problems.append(f"{name}: converted file does not verify (rc {vrc})")
    return row, problems


LIVE = []  # one line per guest for issue 35's live dumps, printed under the table


def writer_rate(console):
    """The guest writer's rate in MB/s: the median over its passes of the
    bytes of a pass over the uptime between two console lines (domu-init's
    XENLAB-WRITER lines)."""
    points = []
    try:
        for line in open(console, errors="replace"):
            m = re.search(r"XENLAB-WRITER (\d+) MiB at ([0-9.]+)", line)
            if m:
                points.append((int(m.group(1)), float(m.group(2))))
    except OSError:
        return None
    rates = sorted((b[0] - a[0]) * 1.048576 / (b[1] - a[1]) for a, b in zip(points, points[1:]) if b[1] > a[1])
    return rates[len(rates) // 2] if rates else None


def core_backtrace(args, core):
    """The backtrace of every thread of a core that dom0 saved, by gdb with
    dom0's root file system and the packages' debug symbols (deb-root, from
    tests/xen-lab/run's unpack_packages); lines to print with the report."""
    if not os.path.exists(core):
        return ["(no core saved)"]
    gdb = shutil.which("gdb")
    if not gdb:
        return [f"(gdb is not installed: the core is {core})"]
    root = os.path.join(args.work, "dom0-root")
    debug = os.path.join(args.work, "deb-root", "usr", "lib", "debug")
    exe = os.path.join(root, "usr", "sbin", "xen-dumpd")
    # The debug directory first: set after the sysroot, gdb looks for it inside.
    r = subprocess.run([gdb, "-batch", "-nx", "-ex", f"set debug-file-directory {debug}", "-ex", f"set sysroot {root}",
                        "-ex", "thread apply all bt 25", exe, core], capture_output=True, text=True, timeout=300)
    lines = [line for line in r.stdout.splitlines() if line.startswith(("#", "Thread"))]
    return lines[:120] or [f"(gdb printed no stack: {r.stderr.strip()[-300:]})"]


def check_live(name, args, env, tools):
    """Issue 35 on real Xen. PVH and HVM: the live dump of the running guest
    (its writer rewriting memory), left paused at its final round, equals page
    for page and vcpu for vcpu a paused dump of that same instant, verifies and
    opens in crash; its pause is printed beside the paused dump's time. PV: the
    hypervisor has no shadow paging, so --live is refused with the reason and
    nothing is written."""
    out = args.out
    row = {"guest": f"{name} live"}
    problems = []
    log = os.path.join(out, f"{name}-live.log")
    if env.get(f"{name}.live.rc") is None:
        if f"{name}.ready.secs" not in env and name in MAY_NOT_BOOT:
            return row, []
        return row, [f"{name}: the live dump never ran"]
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    if name == "pv":
        refused = env.get("pv.live.rc") != "0" and re.search(r"shadow", text, re.I)
        row["verify"] = "refused" if refused else "FAIL"
        if not refused:
            problems.append(f"pv: --live was not refused for want of shadow paging (rc {env.get('pv.live.rc')}): "
                            f"{tail(log)}")
        if env.get("pv.live.written") != "no":
            problems.append("pv: the refused live dump left a file")
        LIVE.append(f"pv: refused (rc {env.get('pv.live.rc')}): " + " ".join(text.split())[:200])
        return row, problems
    crashed = env.get(f"{name}.live.crashed_rc")
    if crashed:
        # dom0-init made the dump once more after one killed by a signal: the
        # crash is printed with its backtrace; the second dump must have
        # turned off the log-dirty mode the first left on, and passes the
        # checks below.
        first = os.path.join(out, f"{name}-live-crashed.log")
        LIVE.append(f"{name}: the first live dump was killed (rc {crashed}): {' '.join(tail(first).split())[:200]}")
        LIVE.extend("    " + line for line in core_backtrace(args, os.path.join(out, f"{name}-live.core")))
        if not re.search(r"turned off log-dirty mode.*had left on", text):
            problems.append(f"{name}: the dump after the killed one did not turn off its log-dirty mode: {tail(log)}")
    if env.get(f"{name}.live.rc") != "0":
        return row, problems + [f"{name}: the live dump failed (rc {env.get(name + '.live.rc')}): {tail(log)}"]
    if "p" not in env.get(f"{name}.live.state_after", ""):
        problems.append(f"{name}: not paused after --live --leave-paused ({env.get(name + '.live.state_after')})")
    live_path, ref_path = os.path.join(out, f"{name}.live.xdump"), os.path.join(out, f"{name}.liveref.xdump")
    if not (os.path.exists(live_path) and os.path.exists(ref_path)):
        return row, problems + [f"{name}: the live dump or its paused reference is missing"]
    live, ref = DumpFile(live_path), DumpFile(ref_path)
    row["pages"] = str(len(live.pfns))
    compared, equal = compare(ref, live, problems, f"{name} paused vs live")
    row["equal/compared"] = f"{equal}/{compared}"
    rc = run([tools["xen-dumpctl"], "verify", live_path], os.path.join(out, f"{name}-live-verify.log"))
    row["verify"] = "ok" if rc == 0 else f"FAIL({rc})"
    if rc != 0:
        problems.append(f"{name}: the live dump does not verify: {tail(os.path.join(out, name + '-live-verify.log'))}")
    m = re.search(r"paused (\d+) us after (\d+) round\(s\), (\d+)", text)
    pause = f"paused {int(m.group(1)) / 1000:.1f} ms after {m.group(2)} round(s), {m.group(3)} pages re-copied" \
        if m else "pause not reported"
    if not m:
        problems.append(f"{name}: the live dump did not report its pause: {tail(log)}")
    rate = writer_rate(os.path.join(out, f"{name}-console.log"))
    # Issue 35 item 2: an HVM guest's device model told to log its writes
    # (the dump is refused when QEMU refuses; a missing socket is a warning).
    device_model = ""
    if name == "hvm":
        socket = env.get("hvm.qmp_socket", "none")
        # Any word of the device model is a warning about it, but for the
        # line of a dump that found its dirty logging left on by a killed one.
        said = "\n".join(line for line in text.splitlines() if "had left on" not in line)
        if socket == "none" or "device model" in said:
            problems.append(f"hvm: the device model's dirty logging was not used (socket: {socket}): {tail(log)}")
        else:
            device_model = f"; device model told to log its writes on {socket}"
    row["ours s"] = env.get(f"{name}.live.secs", "-")
    info = subprocess.run([tools["xen-dumpctl"], "info", "--json", live_path], capture_output=True, text=True)
    try:
        release = json.loads(info.stdout[info.stdout.index("{"):]).get("kernel", {}).get("release", "")
    except ValueError:
        release = ""
    if not release:
        problems.append(f"{name}: no guest kernel found in the live dump: {info.stderr.strip()[-200:]}")
    vmlinux = os.environ.get("XENLAB_VMLINUX") or f"/usr/lib/debug/boot/vmlinux-{release}"
    if release and os.path.exists(vmlinux):
        row["crash"] = crash_sys_log_bt(f"{name} live", live_path, vmlinux, release,
                                        os.path.join(out, f"{name}-live-crash"), problems)
    LIVE.append(f"{name}: {pause} (the paused dump of this guest took {env.get(name + '.dumpd.secs', '?')} s); "
                f"writer {'%.1f MB/s' % rate if rate else 'rate unknown'}; live dump {env.get(name + '.live.secs')} s; "
                f"{equal}/{compared} pages equal to the paused dump of the same instant{device_model}")
    return row, problems


# xen-dumpd's MESSAGE_ID for a dump it wrote (daemon/journal_log.hpp).
MESSAGE_DUMP_WRITTEN = "a87f8b9b9bce4231b361f9bcb5a18f16"
SYSTEMD = {}  # what the systemd checks found, printed under the table


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def journal_dump_entry(out, dump_name, domid, problems):
    """The journal entry xen-dumpd wrote for the crash dump (journalctl -o
    json, one object per line): MESSAGE_ID, unit, DOMID, DUMP_PATH,
    DUMP_RESULT, GUEST_PANIC."""
    import json
    entries = []
    for line in read_text(os.path.join(out, "svc-journal.json")).splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    written = [e for e in entries if e.get("MESSAGE_ID") == MESSAGE_DUMP_WRITTEN]
    if not written:
        problems.append(f"no journal entry with MESSAGE_ID={MESSAGE_DUMP_WRITTEN} among the "
                        f"{len(entries)} entries of xen-dumpd.service (svc-journal.json)")
        return None
    e = written[-1]
    want = {"_SYSTEMD_UNIT": "xen-dumpd.service", "DOMID": domid, "DUMP_RESULT": "ok",
            "DUMP_PATH": f"/var/lib/xen/dump/{dump_name}", "DOMAIN": "crash"}
    for key, value in want.items():
        if e.get(key) != value:
            problems.append(f"journal entry: {key}={e.get(key)!r}, expected {value!r}")
    if "Kernel panic - not syncing" not in str(e.get("GUEST_PANIC", "")):
        problems.append(f"journal entry: GUEST_PANIC={e.get('GUEST_PANIC')!r} lacks the guest's panic")
    keep = ("MESSAGE_ID", "MESSAGE", "PRIORITY", "_SYSTEMD_UNIT", "DOMID", "DOMAIN", "DUMP_PATH", "DUMP_REASON",
            "DUMP_RESULT", "DUMP_SIZE", "GUEST_PANIC", "GUEST_DMESG_PATH")
    return json.dumps({k: e[k] for k in keep if k in e}, indent=1)


def check_systemd(args, env, dump_name, problems):
    """Issue 22: the packaged unit under Debian's systemd as PID 1."""
    out = args.out
    if env.get("dom0.pid1") != "systemd":
        problems.append(f"dom0's PID 1 is {env.get('dom0.pid1')!r}, not systemd")
    SYSTEMD["dom0"] = (f"PID 1 {env.get('dom0.pid1', '?')} {env.get('dom0.systemd', '')}, "
                       f"system {env.get('dom0.system_state', '?')}; {env.get('dom0.boot_time', '?')}")
    if env.get("dom0.failed_units", "").strip():
        NOTES.append(f"dom0: failed units: {env['dom0.failed_units'].strip()}")
    if env.get("xen.service") != "active":
        problems.append(f"Debian's xen.service is {env.get('xen.service')!r}")
    if env.get("svc.enabled") != "enabled":
        problems.append(f"xen-dumpd.service is {env.get('svc.enabled')!r}, not enabled by its package")
    show = read_env(os.path.join(out, "svc-show-start.txt"))
    status_text = show.get("StatusText", "")
    status = read_text(os.path.join(out, "svc-status-start.txt"))
    status_line = next((l.strip() for l in status.splitlines() if l.strip().startswith("Status:")), "")
    SYSTEMD["unit"] = (f"{env.get('svc.enabled', '?')}, {env.get('svc.active', '?')} "
                       f"(Type={show.get('Type', '?')}, {show.get('SubState', '?')}); {status_line or 'no Status: line'}")
    if env.get("svc.active") != "active" or show.get("Type") != "notify":
        problems.append(f"xen-dumpd.service is {env.get('svc.active')!r} (Type={show.get('Type')}): "
                        f"{tail(os.path.join(out, 'svc-status-start.txt'), 8)}")
    if not status_text or f'Status: "{status_text}"' not in status:
        problems.append(f"systemctl status shows no notify STATUS (StatusText={status_text!r})")
    security = env.get("svc.security", "")
    SYSTEMD["security"] = security or "(not recorded)"
    if not re.match(r"^\d+(\.\d+)? ", security):
        problems.append(f"systemd-analyze security gave no score: {tail(os.path.join(out, 'svc-security.txt'))}")
    if env.get("svc.active") != "active":
        return  # dom0 went no further with the service
    if dump_name:
        entry = journal_dump_entry(out, dump_name, env.get("crash.domid"), problems)
        SYSTEMD["journal"] = entry or "(none)"
    if env.get("svc.list.rc") != "0":
        problems.append(f"xen-dumpctl list as root failed (rc {env.get('svc.list.rc')})")
    refused = read_text(os.path.join(out, "svc-list-unprivileged.txt")).strip()
    SYSTEMD["unprivileged"] = f"exit {env.get('svc.list_unprivileged.rc')}: {refused[:200]}"
    if env.get("svc.list_unprivileged.rc") in (None, "0") or "ermission denied" not in refused:
        problems.append(f"xen-dumpctl list as nobody was not refused: {SYSTEMD['unprivileged']}")
    if env.get("svc.dump_dir_mode") != "700 root:root":
        problems.append(f"the dump directory is {env.get('svc.dump_dir_mode')}, not 700 root:root")
    if env.get("svc.stop.rc") != "0" or env.get("svc.result") != "success" or env.get("svc.nrestarts") != "0":
        problems.append(f"systemctl stop rc {env.get('svc.stop.rc')}, Result={env.get('svc.result')}, "
                        f"NRestarts={env.get('svc.nrestarts')}: {tail(os.path.join(out, 'svc-journal.txt'))}")


def service_dumps(out, subdir, suffix):
    """The dump files (NAME ending in suffix) the service wrote, as dom0
    copied them into out/subdir, sorted; [] when there are none."""
    d = os.path.join(out, subdir)
    return sorted(f for f in os.listdir(d) if f.endswith(suffix)) if os.path.isdir(d) else []


def check_service(args, env, tools):
    out = args.out
    problems = []
    row = {"guest": "crash (service)"}
    if env.get("svc.active") != "active":
        check_systemd(args, env, None, problems)
        return row, problems or [f"xen-dumpd.service is not active: {tail(os.path.join(out, 'svc-journal.txt'))}"]
    if "crash.ready.secs" not in env:
        return row, ["the crash guest did not boot"]
    svc = os.path.join(out, "svc")
    dumps = service_dumps(out, "svc", ".core")
    if not dumps:
        return row, [f"the service did not dump the crashed guest: {tail(os.path.join(out, 'svc-journal.txt'))}"]
    check_systemd(args, env, dumps[0], problems)
    row["ours s"] = env.get("svc.dump_seen_after_crash.secs", "-") + " after crash"
    dump = DumpFile(os.path.join(svc, dumps[0]))
    row["pages"] = str(len(dump.pfns))
    rc = run([tools["xen-dumpctl"], "verify", dump.path], os.path.join(out, "svc-verify.log"))
    row["verify"] = "ok" if rc == 0 else f"FAIL({rc})"
    if rc != 0:
        problems.append(f"service dump does not verify: {tail(os.path.join(out, 'svc-verify.log'))}")
    listing = read_text(os.path.join(out, "svc-list.txt"))
    if env.get("svc.list.rc") != "0" or dumps[0] not in listing:
        problems.append(f"xen-dumpctl list (rc {env.get('svc.list.rc')}) does not show the dump: {listing.strip()[:300]}")
    # The crashed guest's own log, from the dump: its panic must be there.
    row["dmesg"] = check_dmesg("svc", dump.path, tools, out, problems, pv=True,
                               must_show="Kernel panic - not syncing")
    row["bt"] = check_panic_backtrace("svc", dump.path, tools, out, problems)
    marker = dump.data.find(b"XENLAB-GUEST-MEMORY-MARKER") >= 0
    row["equal/compared"] = "marker found" if marker else "NO marker"
    if not marker:
        problems.append("the guest's memory marker is not in the service's dump")
    return row, problems


def check_service_encrypted(args, env, tools):
    """Issue 33: the service, configured with a recipient for the crashage
    guest ([Domain crashage] Recipient= in a drop-in), wrote its dump
    encrypted; dom0 (public key only) lists it as encrypted and cannot read
    its pages; the guest's marker is in no file dom0 holds; here, with the
    private key, `age -d` gives a v1 dump that verifies, holds the marker and
    crash opens (sys, log, bt); `xen-dumpctl verify -i` reads the encrypted
    file itself."""
    out = args.out
    problems = []
    row = {"guest": "crashage (service, age)"}
    if "crashage.ready.secs" not in env:
        return row, ["the crashage guest did not boot"]
    svc = os.path.join(out, "svcage")
    dumps = service_dumps(out, "svcage", ".core.age")
    if not dumps:
        return row, [f"the service did not write an encrypted dump of crashage: {tail(os.path.join(out, 'svc-journal.txt'))}"]
    row["ours s"] = env.get("svcage.dump_seen_after_crash.secs", "-") + " after crash"
    enc = os.path.join(svc, dumps[0])
    key = os.path.join(args.work, "age", "lab.key")
    if env.get("svcage.marker_files", "").strip():
        problems.append(f"the guest's marker is in clear in dom0's {env['svcage.marker_files'].strip()}")
    with open(enc, "rb") as f:
        head = f.read(64)
    if not head.startswith(b"age-encryption.org/v1\n"):
        problems.append(f"{dumps[0]} does not start with an age header: {head[:30]!r}")
    listing = read_text(os.path.join(out, "svcage-list.txt"))
    if env.get("svcage.list.rc") != "0" or "v1+age" not in listing:
        problems.append(f"dom0's xen-dumpctl list does not show the dump as v1+age: {listing.strip()[-300:]}")
    info = read_text(os.path.join(out, "svcage-dom0info.txt"))
    if env.get("svcage.dom0info.rc") != "0" or not re.search(r"Encrypted:\s+\(?age, 1 recipient", info):
        problems.append(f"dom0's xen-dumpctl info (rc {env.get('svcage.dom0info.rc')}) does not say "
                        f"'Encrypted: age, 1 recipient': {info.strip()[-300:]}")
    if env.get("svcage.dom0verify.rc") != "3":
        problems.append(f"dom0's xen-dumpctl verify without a key exited {env.get('svcage.dom0verify.rc')}, not 3: "
                        f"{read_text(os.path.join(out, 'svcage-dom0verify.txt')).strip()[-300:]}")
    plain = os.path.join(svc, dumps[0][:-len(".age")])
    r = subprocess.run(["age", "-d", "-i", key, "-o", plain, enc], capture_output=True, text=True)
    if r.returncode != 0:
        return row, problems + [f"age -d failed on {dumps[0]}: {r.stderr.strip()[-300:]}"]
    rc = run([tools["xen-dumpctl"], "verify", "-i", key, enc], os.path.join(out, "svcage-verify-i.log"))
    rc2 = run([tools["xen-dumpctl"], "verify", plain], os.path.join(out, "svcage-verify.log"))
    row["verify"] = "ok (-i, age -d)" if rc == 0 and rc2 == 0 else f"FAIL({rc},{rc2})"
    if rc != 0:
        problems.append(f"xen-dumpctl verify -i KEY of the encrypted dump failed: "
                        f"{tail(os.path.join(out, 'svcage-verify-i.log'))}")
    if rc2 != 0:
        problems.append(f"the decrypted dump does not verify: {tail(os.path.join(out, 'svcage-verify.log'))}")
    dump = DumpFile(plain)
    row["pages"] = str(len(dump.pfns))
    marker = dump.data.find(b"XENLAB-GUEST-MEMORY-MARKER") >= 0
    row["equal/compared"] = "marker after age -d" if marker else "NO marker"
    if not marker:
        problems.append("the guest's memory marker is not in the decrypted dump")
    row["dmesg"] = check_dmesg("svcage", plain, tools, out, problems, pv=True,
                               must_show="Kernel panic - not syncing")
    info = subprocess.run([tools["xen-dumpctl"], "info", "--json", plain], capture_output=True, text=True)
    try:
        release = json.loads(info.stdout)["kernel"]["release"]
    except (ValueError, KeyError, TypeError):
        return row, problems + [f"xen-dumpctl info --json of the decrypted dump: {info.stderr.strip()[-300:]}"]
    vmlinux = os.environ.get("XENLAB_VMLINUX") or f"/usr/lib/debug/boot/vmlinux-{release}"
    if os.path.exists(vmlinux):
        row["crash"] = crash_sys_log_bt("svcage", plain, vmlinux, release, os.path.join(out, "svcage-crash"),
                                        problems)
    else:
        problems.append(f"no {vmlinux}: crash cannot open the decrypted dump")
    return row, problems


STORE = []  # issue 34: what the host found in the S3 store, printed under the table


def check_store(args, env, tools):
    """Issue 34: dom0's service, given the host's S3 store (tests/s3-lab's
    Ceph RGW, reached through QEMU's user network) in an [Upload] drop-in,
    uploaded the crashed guests' dumps; here, `xen-dumpctl list --store`
    shows the plain one with the crash signature its local sidecar holds and
    the encrypted one, and `xen-dumpctl verify s3://...` reads the object."""
    out = args.out
    problems = []
    row = {"guest": "store (service, S3)"}
    s3 = read_env(args.s3_env)
    setup = env.get("svc.upload.setup", "")
    if not setup.startswith("active"):
        return row, [f"dom0 could not set up the upload (svc.upload.setup={setup!r}): "
                     f"{tail(os.path.join(out, 'svc-journal.txt'))}"]
    dumps = service_dumps(out, "svc", ".core")
    if not dumps:
        return row, ["no local dump of the crash guest to look for in the store"]
    name = dumps[0]
    local_sig = ""
    try:
        with open(os.path.join(out, "svc", name + ".json")) as f:
            local_sig = json.load(f).get("crash_signature", "")
    except (OSError, ValueError):
        problems.append(f"the local sidecar {name}.json cannot be read")
    penv = dict(os.environ, AWS_ACCESS_KEY_ID=s3.get("AWS_ACCESS_KEY_ID", ""),
                AWS_SECRET_ACCESS_KEY=s3.get("AWS_SECRET_ACCESS_KEY", ""),
                AWS_REGION=s3.get("AWS_REGION", "us-east-1"), AWS_ENDPOINT_URL=s3.get("S3LAB_ENDPOINT", ""))
    store = f"s3://{s3.get('S3LAB_BUCKET', 'xenlab')}/lab"
    listing = subprocess.run([tools["xen-dumpctl"], "list", "--store", store, "--json"], capture_output=True,
                             text=True, env=penv)
    with open(os.path.join(out, "store-list.json"), "w") as f:
        f.write(listing.stdout + listing.stderr)
    text = subprocess.run([tools["xen-dumpctl"], "list", "--store", store, "--utc"], capture_output=True,
                          text=True, env=penv)
    with open(os.path.join(out, "store-list.txt"), "w") as f:
        f.write(text.stdout + text.stderr)
    try:
        entries = json.loads(listing.stdout)
    except ValueError:
        return row, problems + [f"xen-dumpctl list --store {store} (rc {listing.returncode}): "
                                f"{listing.stderr.strip()[-300:]}"]
    ours = [e for e in entries if str(e.get("path", "")).endswith("/" + name)]
    if not ours:
        return row, problems + [f"{name} is not in the store's list: {[e.get('path') for e in entries]}"]
    e = ours[0]
    row["pages"] = str(e.get("pages", "-"))
    sig = e.get("crash_signature") or ""
    if not sig or sig != local_sig:
        problems.append(f"the store lists {name} with signature {sig!r}, its local sidecar says {local_sig!r}")
    if e.get("missing") or not e.get("present", True):
        problems.append(f"the store lists {name} without its dump object")
    enc = [x for x in entries if str(x.get("path", "")).endswith(".core.age")]
    if not enc:
        problems.append("the encrypted dump of crashage is not in the store's list")
    with open(os.path.join(out, "store-verify.log"), "w") as f:
        rc = subprocess.run([tools["xen-dumpctl"], "verify", e["path"]], stdout=f, stderr=subprocess.STDOUT,
                            env=penv).returncode if e.get("path") else 1
    row["verify"] = "ok (s3://)" if rc == 0 else f"FAIL({rc})"
    if rc != 0:
        problems.append(f"xen-dumpctl verify {e.get('path')} failed: {tail(os.path.join(out, 'store-verify.log'))}")
    row["equal/compared"] = "signature = sidecar's" if sig and sig == local_sig else "signature differs"
    row["ours s"] = env.get("svc.upload.1.secs", "-") + " to upload"
    STORE.append(f"xen-dumpctl list --store {store}: {len(entries)} dump(s); {e.get('host', '?')}/{name} "
                 f"signature {sig or '-'} (its local sidecar: {local_sig or '-'}); uploaded "
                 f"{env.get('svc.upload.1.secs', '?')} s after its dump; verify of the object: "
                 f"{'ok' if rc == 0 else 'failed'}; encrypted: {', '.join(x['path'].rsplit('/', 1)[-1] for x in enc) or '-'}")
    return row, problems


DRGN_READ = """import sys, drgn
prog = drgn.Program()
prog.set_core_dump(sys.argv[1])
print(prog.read(int(sys.argv[2], 16), 65).split(b"\\0")[0].decode())
"""


def check_kernel(name, path, tools, out, row, problems):
    """Issue 9 on a real guest: VMCOREINFO, registers and kallsyms found in
    our dump; the symbol found by shape equals VMCOREINFO's (KASLR-shifted)
    address; drgn reads init_uts_ns by its virtual address."""
    import json
    log = os.path.join(out, f"{name}-info.json")
    if run([tools["xen-dumpctl"], "info", "--json", path], log) != 0:
        problems.append(f"{name}: xen-dumpctl info failed: {tail(log)}")
        return
    with open(log) as f:
        text = f.read()
    k = json.loads(text[text.index("{"):]).get("kernel", {})
    if not k.get("found") or not k.get("vmcoreinfo"):
        problems.append(f"{name}: no guest kernel / VMCOREINFO found in our dump")
        row["kernel"] = "none"
        return None
    row["kernel"] = f"{k.get('release', '?')} off {k.get('kernel_offset', '?')}"
    row["dmesg"] = check_dmesg(name, path, tools, out, problems, pv=not makedumpfile_reads(path))
    if not k.get("symbols"):
        problems.append(f"{name}: kallsyms not found in our dump")
    # A vcpu paused in user space (the PVH and HVM guests' writer runs
    # there) has no kernel symbol to resolve to; one in the kernel must.
    ips = k.get("vcpu_ips") or []
    in_kernel = [v for v in ips if int(str(v.get("ip", "0")), 0) >= 0xffff800000000000]
    if not ips or not all(v.get("symbol") for v in in_kernel):
        problems.append(f"{name}: vcpu instruction pointers not resolved to symbols: {ips}")
    sym = subprocess.run([tools["xen-dumpctl"], "symbol", "--json", path, "init_uts_ns"],
                         capture_output=True, text=True)
    want = None
    reader = DumpFile(path)
    for line in _vmcoreinfo_text(reader).splitlines():
        if line.startswith("SYMBOL(init_uts_ns)="):
            want = int(line.split("=", 1)[1], 16)
    if sym.returncode != 0 or want is None or int(json.loads(sym.stdout)["address"], 16) != want:
        problems.append(f"{name}: init_uts_ns by shape {sym.stdout.strip()[:120]} != VMCOREINFO {want}")
    vmlinux = os.environ.get("XENLAB_VMLINUX") or f"/usr/lib/debug/boot/vmlinux-{k.get('release', '')}"
    if os.path.exists(vmlinux):
        row["vs vmlinux"] = compare_with_vmlinux(tools, path, vmlinux, int(k.get("kernel_offset") or "0", 16),
                                                 name, problems)
        row["crash"] = check_crash(name, path, vmlinux, k.get("release", ""), out, problems)
        if shutil.which("crash"):
            row["bt"] = check_idle_backtraces(name, path, tools, vmlinux, out, problems)
    if want is not None and subprocess.run([sys.executable, "-c", "import drgn"], capture_output=True).returncode == 0:
        d = subprocess.run([sys.executable, "-c", DRGN_READ, path, "%x" % want], capture_output=True, text=True)
        row["drgn"] = d.stdout.strip() or "FAIL"
        if d.returncode != 0 or d.stdout.strip() != "Linux":
            problems.append(f"{name}: drgn could not read init_uts_ns: {d.stderr.strip()[-300:]}")
    return k


def check_dmesg(name, path, tools, out, problems, pv=False, must_show=None):
    """Issue 20: `xen-dumpctl dmesg` prints the guest's kernel log from our
    dump, line for line as `makedumpfile --dump-dmesg` does (which reads
    PVH/HVM dumps, and PV ones that have makedumpfile's view; `pv` set: skip it)."""
    log = os.path.join(out, f"{name}-dmesg.txt")
    r = subprocess.run([tools["xen-dumpctl"], "dmesg", path], capture_output=True, text=True, errors="replace")
    with open(log, "w") as f:
        f.write(r.stdout)
    if r.returncode != 0 or not r.stdout.strip():
        problems.append(f"{name}: xen-dumpctl dmesg failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
        return "FAIL"
    lines = r.stdout.count("\n")
    if must_show and must_show not in r.stdout:
        problems.append(f"{name}: the kernel log from the dump does not show {must_show!r} (see {log})")
        return "FAIL"
    if pv or not shutil.which("makedumpfile"):
        return f"{lines} lines"
    ref = os.path.join(out, f"{name}-makedumpfile-dmesg.txt")
    if os.path.exists(ref):
        os.remove(ref)
    m = subprocess.run(["makedumpfile", "--dump-dmesg", path, ref], capture_output=True, text=True)
    if m.returncode != 0 or not os.path.exists(ref):
        problems.append(f"{name}: makedumpfile --dump-dmesg failed on our dump: {(m.stdout + m.stderr).strip()[-300:]}")
        return "FAIL"
    with open(ref, errors="replace") as f:
        theirs = f.read()
    if theirs != r.stdout:
        a, b = r.stdout.splitlines(), theirs.splitlines()
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        problems.append(f"{name}: dmesg differs from makedumpfile's at line {at + 1} "
                        f"({len(a)} vs {len(b)} lines): {a[at:at + 1]} vs {b[at:at + 1]}")
        return "FAIL"
    return f"= makedumpfile ({lines})"


CRASH_FRAME = re.compile(r"^\s*#(\d+) \[([0-9a-f]+)\] (\S+) at ([0-9a-f]+)")


def crash_bt(path, vmlinux, args, out_log):
    """crash's `bt ARGS` on a dump: per task header, the list of function
    names of its frames (#0 first)."""
    cmds = out_log + ".cmds"
    with open(cmds, "w") as f:
        f.write(f"bt {args}\nquit\n")
    r = subprocess.run(["crash", "-s", "-i", cmds, vmlinux, path], capture_output=True, text=True,
                       timeout=600, errors="replace")
    with open(out_log, "w") as f:
        f.write(r.stdout + r.stderr)
    traces, current = [], None
    for line in r.stdout.splitlines():
        if line.startswith("PID:"):
            cpu = re.search(r"CPU: (\d+)", line)
            current = {"cpu": int(cpu.group(1)) if cpu else None, "header": line.strip(), "functions": []}
            traces.append(current)
        elif current is not None and (m := CRASH_FRAME.match(line)):
            current["functions"].append(m.group(3))
    return traces


def our_backtraces(tools, path):
    """`xen-dumpctl backtrace --json`: the JSON object (None on failure)."""
    import json
    r = subprocess.run([tools["xen-dumpctl"], "backtrace", "--json", path], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()[-300:]
    return json.loads(r.stdout), ""


def function_names(trace):
    """Our reliable frames' function names, innermost first."""
    return [f["symbol"].split("+")[0] for f in trace.get("frames", []) if f.get("reliable") and f.get("symbol")]


def compare_bt(ours, theirs):
    """How crash's frames line up with ours, in order (ours may have frames
    above crash's #0, e.g. the hypercall a vcpu sat in; crash may show stale
    frames that ours, like the kernel's own unwinder, does not). Returns (how
    many of crash's frames from #0 on match in a row, where the first match
    is in ours or None, crash's frames ours does not have in that order)."""
    i, in_row, start, skipped = 0, 0, None, []
    for k, fn in enumerate(theirs):
        if fn in ours[i:]:
            j = ours.index(fn, i)
            start = j if start is None else start
            i = j + 1
            in_row += in_row == k
        else:
            skipped.append(fn)
    return in_row, start, skipped


def check_idle_backtraces(name, path, tools, vmlinux, out, problems):
    """Each vcpu's backtrace (xen-dumpctl backtrace) beside crash's `bt -a`
    for the task on that cpu, written to NAME-backtrace.txt. crash's #0 of
    an idle vcpu in a dump without a panic may be a stale frame (it cannot
    take the vcpu's registers as the point it stopped), so only the frames
    in common are counted: informational, a failure only when ours fails."""
    ours_all, err = our_backtraces(tools, path)
    if ours_all is None:
        problems.append(f"{name}: xen-dumpctl backtrace failed: {err}")
        return "FAIL"
    theirs_all = crash_bt(path, vmlinux, "-a", os.path.join(out, f"{name}-crash-bt-a.log"))
    common = total = 0
    with open(os.path.join(out, f"{name}-backtrace.txt"), "w") as f:
        for t in theirs_all:
            v = next((x for x in ours_all["vcpus"] if x["vcpu"] == t["cpu"]), None)
            ours = function_names(v) if v else []
            _, start, skipped = compare_bt(ours, t["functions"])
            common += len(t["functions"]) - len(skipped)
            total += len(t["functions"])
            f.write(f"cpu {t['cpu']}: crash: {' < '.join(t['functions'])}\n"
                    f"       ours ({v.get('method') if v else '-'}): {' < '.join(ours)}\n"
                    f"       crash frames not in ours in that order: {skipped}\n")
    return f"{common}/{total} of crash's"


def check_panic_backtrace(name, path, tools, out, problems):
    """Issue 20: the backtrace of the panicking vcpu (xen-dumpctl backtrace)
    names the same functions, in the same order, as crash's `bt` on the dump,
    at least from crash's #0 down to the caller of panic(); `xen-dumpctl
    info` and the service's sidecar show its top frames."""
    import json
    if not shutil.which("crash"):
        return "-"
    info = subprocess.run([tools["xen-dumpctl"], "info", "--json", path], capture_output=True, text=True)
    try:
        k = json.loads(info.stdout)["kernel"]
    except (ValueError, KeyError):
        problems.append(f"{name}: xen-dumpctl info --json failed: {info.stderr.strip()[-300:]}")
        return "FAIL"
    vmlinux = os.environ.get("XENLAB_VMLINUX") or f"/usr/lib/debug/boot/vmlinux-{k.get('release', '')}"
    if not os.path.exists(vmlinux):
        return "-"
    theirs_all = crash_bt(path, vmlinux, "", os.path.join(out, f"{name}-crash-bt.log"))
    ours_all, err = our_backtraces(tools, path)
    log = os.path.join(out, f"{name}-backtrace.txt")
    if ours_all is None:
        problems.append(f"{name}: xen-dumpctl backtrace failed: {err}")
        return "FAIL"
    if not theirs_all or not theirs_all[0]["functions"]:
        problems.append(f"{name}: crash bt printed no frames (see {name}-crash-bt.log)")
        return "FAIL"
    theirs = theirs_all[0]["functions"]
    vcpu = ours_all.get("panic_vcpu")
    trace = next((v for v in ours_all["vcpus"] if v["vcpu"] == vcpu), None)
    if trace is None:
        problems.append(f"{name}: xen-dumpctl backtrace did not find the vcpu that panicked (panic_vcpu {vcpu})")
        return "FAIL"
    ours = function_names(trace)
    in_row, start, skipped = compare_bt(ours, theirs)
    # crash's #0 is panic (or the function that called into it); its caller follows.
    need = theirs.index("panic") + 2 if "panic" in theirs else 2
    with open(log, "w") as f:
        f.write(f"crash bt ({theirs_all[0]['header']}):\n  " + "\n  ".join(theirs) + "\n")
        f.write(f"ours (vcpu {vcpu}, {trace.get('method')}):\n  " + "\n  ".join(ours) + "\n")
        f.write(f"crash's first {in_row} frames follow ours in order from our frame {start}; "
                f"crash frames ours skips: {skipped}\n")
    if in_row < min(need, len(theirs)):
        problems.append(f"{name}: our backtrace of vcpu {vcpu} {ours[:12]} does not name crash's bt frames "
                        f"{theirs[:need]} in order (see {log})")
        return "FAIL"
    bt = k.get("crash_backtrace") or {}
    if bt.get("vcpu") != vcpu or function_names(bt)[:len(ours[:8])] != ours[:8]:
        problems.append(f"{name}: xen-dumpctl info does not show vcpu {vcpu}'s top frames: {bt}")
    sidecar = path + ".json"
    if os.path.exists(sidecar):
        with open(sidecar) as f:
            frames = (json.load(f).get("guest_backtrace") or {}).get("frames") or []
        caller = theirs[min(need, len(theirs)) - 1]
        if not any(fn.split("+")[0] == caller for fn in frames):
            problems.append(f"{name}: the service's sidecar has no guest_backtrace naming {caller} "
                            f"(frames: {frames[:8]})")
    return f"= crash bt ({in_row}/{len(theirs)})"


def check_crash(name, path, vmlinux, release, out, problems):
    """See crash_sys_log_bt; the log is NAME-crash.log."""
    return crash_sys_log_bt(name, path, vmlinux, release, os.path.join(out, f"{name}-crash"), problems)


def crash_sys_log_bt(name, path, vmlinux, release, stem, problems, bt="bt"):
    """crash opens our dump with the guest's vmlinux and runs sys, log and bt:
    PVH/HVM through its ELF reader (KASLR from VMCOREINFO, no flag), PV through its Xen
    dump reader (the program headers follow the section headers)."""
    if not shutil.which("crash"):
        return "-"
    cmds, log = stem + ".cmds", stem + ".log"
    with open(cmds, "w") as f:
        f.write(f"sys\nlog\n{bt}\nquit\n")
    try:
        # No --kaslr=auto: crash must find a KASLR guest's offset by itself.
        r = subprocess.run(["crash", "-s", "-i", cmds, vmlinux, path],
                           capture_output=True, text=True, timeout=600)
        text, rc = r.stdout + r.stderr, r.returncode
    except subprocess.TimeoutExpired:
        text, rc = "timed out after 600 s", -1
    with open(log, "w") as f:
        f.write(text)
    frames = r"START: \w+" if bt == "bt -t" else r"#0 \[[0-9a-f]+\] \w+ at ffffffff"
    ok = (rc == 0 and f"RELEASE: {release}" in text and f"] Linux version {release}" in text
          and re.search(frames, text) and "read error" not in text)
    if not ok:
        problems.append(f"{name}: crash sys/log/{bt} failed on {os.path.basename(path)} (exit {rc}): "
                        f"{text.strip()[-300:]}")
        return "FAIL"
    return f"sys log {bt}"


def compare_with_vmlinux(tools, path, vmlinux, kernel_offset, name, problems):
    """Every symbol found by shape against `nm vmlinux`, shifted by KERNELOFFSET
    (kernel image addresses only; per-cpu offsets are not relocated)."""
    nm = subprocess.run(["nm", vmlinux], capture_output=True, text=True)
    ours = subprocess.run([tools["xen-dumpctl"], "symbol", "--list", path], capture_output=True, text=True)
    if nm.returncode != 0 or ours.returncode != 0:
        problems.append(f"{name}: nm or xen-dumpctl symbol --list failed: {nm.stderr[-200:]}{ours.stderr[-200:]}")
        return "FAIL"
    table = {}
    for line in nm.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            table.setdefault(parts[2], set()).add(int(parts[0], 16))
    checked = bad = 0
    first = ""
    for line in ours.stdout.splitlines():
        addr, _, sym = line.split()[:3]
        a = int(addr, 16)
        if a >= 0xFFFFFFFF80000000:
            a -= kernel_offset
        checked += 1
        if a not in table.get(sym, ()):
            bad += 1
            first = first or line
    if bad or checked == 0:
        problems.append(f"{name}: {bad} of {checked} symbols differ from {vmlinux} (first: {first})")
        return "FAIL"
    return f"{checked} equal"


def _vmcoreinfo_text(dump):
    """The VMCOREINFO note's text from the PT_NOTE segment (ELF program headers)."""
    phoff, = struct.unpack_from("<Q", dump.data, 32)
    phentsize, phnum = struct.unpack_from("<HH", dump.data, 54)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", dump.data, phoff + i * phentsize)
        if p_type != 4:  # PT_NOTE
            continue
        pos, end = p_offset, p_offset + p_filesz
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", dump.data, pos)
            name = bytes(dump.data[pos + 12:pos + 12 + namesz]).rstrip(b"\0")
            desc = pos + 12 + ((namesz + 3) & ~3)
            if name == b"VMCOREINFO":
                return bytes(dump.data[desc:desc + descsz]).split(b"\0")[0].decode(errors="replace")
            pos = desc + ((descsz + 3) & ~3)
    return ""


# Issue 18: compact (kdump) dumps of each lab guest, level 31, beside the v1
# dump they are converted from.
COMPACT = []  # (guest, v1 pages, kept pages, v1 bytes, zstd bytes, zlib bytes)
KDUMP_SIGNATURE = b"KDUMP   "


def makedumpfile_reads(path):
    """True when makedumpfile finds program headers at offset 64, where it
    reads them whatever e_phoff says: HVM/PVH files, and PV files with
    makedumpfile's view (xen-dump-core(5)), whose first entry there is a
    PT_NOTE just after the table."""
    with open(path, "rb") as f:
        head = f.read(64 + 56)
    phoff, = struct.unpack_from("<Q", head, 32)
    phnum, = struct.unpack_from("<H", head, 56)
    p_type, _, p_offset = struct.unpack_from("<IIQ", head, 64)
    return phoff == 64 or (p_type == 4 and p_offset == 64 + 56 * phnum)


def kdump_kept(path):
    """The frames a kdump file stores: the set bits of its second bitmap
    (makedumpfile's diskdump header and kdump_sub_header)."""
    with open(path, "rb") as f:
        head = f.read(464)
        if head[:8] != KDUMP_SIGNATURE:
            raise ValueError(f"{path}: no KDUMP signature")
        block_size, sub_hdr_size, bitmap_blocks = struct.unpack_from("<iiI", head, 428)
        f.seek(block_size * (1 + sub_hdr_size) + block_size * bitmap_blocks // 2)
        bitmap = f.read(block_size * bitmap_blocks // 2)
    kept = set()
    for i, byte in enumerate(bitmap):
        if byte:
            kept.update(i * 8 + b for b in range(8) if byte >> b & 1)
    return kept


LIBKDUMPFILE_READ = """import struct, sys, kdumpfile
kd, v1, pairs, kind = sys.argv[1:5]
k = kdumpfile.kdumpfile(kd)
k.attr["addrxlat.ostype"] = "linux"
space = kdumpfile.KDUMP_MACHPHYSADDR if kind == "mach" else kdumpfile.KDUMP_KPHYSADDR
bad = n = 0
with open(v1, "rb") as f, open(pairs, "rb") as p:
    data = p.read()
    for frame, offset in struct.iter_unpack("<QQ", data):
        f.seek(offset)
        try:
            same = k.read(space, frame * 4096, 4096) == f.read(4096)
        except Exception as e:
            same = False
        if not same:
            if bad < 5:
                print("frame %#x differs or is unreadable" % frame)
            bad += 1
        n += 1
print("%d pages read, %d differ" % (n, bad))
sys.exit(1 if bad or n == 0 else 0)
"""


def frame_to_pfn(ours):
    """Frames of our compact file -> pfns: gmfns for PV (filed by machine
    frame, as a Xen dom0's kdump file), pfns otherwise."""
    if ours.gmfns is not None and ours.header["magic"] == 0xF00FEBED:
        return dict(zip(ours.gmfns, ours.pfns)), "mach"
    return {p: p for p in ours.pfns}, "phys"


def compare_with_makedumpfile(name, ours, kept, to_pfn, out, problems):
    """`makedumpfile -d 31` on our v1 dump keeps the same frames as our level
    31 (both filed by machine frame for PV), but for zero pages: makedumpfile
    1.7.2's kdump output keeps them in its second bitmap, their descriptors
    pointing at one shared zero page (makedumpfile.c write_kdump_pages_cyclic,
    pd_zero; only ELF output and --mem-usage clear their bits), where ours
    leaves them out. Any other difference is a failure."""
    if not shutil.which("makedumpfile"):
        return "-"
    theirs_path = os.path.join(out, f"{name}-makedumpfile-d31.kdump")
    if os.path.exists(theirs_path):
        os.remove(theirs_path)
    log = os.path.join(out, f"{name}-makedumpfile-d31.log")
    rc = run(["makedumpfile", "-d", "31", ours.path, theirs_path], log)
    if rc != 0:
        problems.append(f"{name}: makedumpfile -d 31 failed on our v1 dump (rc {rc}): {tail(log, 3)}")
        return "FAIL"
    theirs = kdump_kept(theirs_path)
    os.remove(theirs_path)  # only its bitmap was wanted
    only_ours, only_theirs = kept - theirs, theirs - kept
    zero = {f for f in only_theirs if f in to_pfn and ours.page(to_pfn[f]).count(0) == PAGE}
    unexplained = only_theirs - zero
    with open(os.path.join(out, f"{name}-d31-bitmaps.txt"), "w") as f:
        f.write(f"ours {len(kept)} frames, makedumpfile {len(theirs)}, common {len(kept & theirs)}\n"
                f"only ours: {ranges(only_ours)}\n"
                f"only makedumpfile's, zero pages (its bitmap keeps them): {len(zero)}: {ranges(zero)}\n"
                f"only makedumpfile's, not zero: {ranges(unexplained)}\n")
    if only_ours or unexplained:
        problems.append(f"{name}: level 31 keeps {len(kept)} frames, makedumpfile -d 31 {len(theirs)} "
                        f"({len(zero)} of them zero pages, which its bitmap keeps): {len(only_ours)} only ours "
                        f"({ranges(only_ours)}), {len(unexplained)} non-zero only makedumpfile's ({ranges(unexplained)})")
        return "FAIL"
    return f"= (+{len(zero)} zero)"


def check_compact(name, ours, k, tools, out, row, problems):
    """Issue 18 on a real guest: our v1 dump converted to kdump level 31
    (zstd, and zlib for makedumpfile 1.7.2) verifies; crash runs sys, log
    and bt on it without flags; libkdumpfile reads every kept page, equal to
    the v1 file's; drgn reads init_uts_ns; the kept frames are makedumpfile
    -d 31's on the v1 file, frame for frame."""
    v1 = ours.path
    files = {}
    for comp in ("zstd", "zlib"):
        path = os.path.join(out, f"{name}-d31-{comp}.kdump")
        log = os.path.join(out, f"{name}-d31-{comp}.log")
        if os.path.exists(path):
            os.remove(path)  # this check's own output of an earlier run (XENLAB_STAGES=check again)
        rc = run([tools["xen-dump-convert"], "--format", "kdump", "--dump-level", "31", "--compress", comp,
                  "-o", path, v1], log)
        if rc == 0:
            rc = run([tools["xen-dumpctl"], "verify", path], os.path.join(out, f"{name}-d31-{comp}-verify.log"))
        if rc != 0:
            problems.append(f"{name}: level 31 {comp} conversion or its verify failed (rc {rc}): {tail(log, 3)}")
            row["d31 kept"] = "FAIL"
            return
        files[comp] = path
    kept = kdump_kept(files["zstd"])
    v1_bytes, zstd_bytes, zlib_bytes = (os.path.getsize(p) for p in (v1, files["zstd"], files["zlib"]))
    COMPACT.append((name, len(ours.pfns), len(kept), v1_bytes, zstd_bytes, zlib_bytes))
    row["d31 kept"] = f"{len(kept)}, {100.0 * zstd_bytes / v1_bytes:.1f}% bytes"
    to_pfn, kind = frame_to_pfn(ours)
    strays = sorted(f for f in kept if f not in to_pfn)
    if strays:
        problems.append(f"{name}: level 31 keeps frames the v1 dump does not have: {ranges(strays)}")
        return
    row["vs makedumpfile"] = compare_with_makedumpfile(name, ours, kept, to_pfn, out, problems)
    readers = []
    release = (k or {}).get("release", "")
    vmlinux = os.environ.get("XENLAB_VMLINUX") or f"/usr/lib/debug/boot/vmlinux-{release}"
    if k and os.path.exists(vmlinux) and shutil.which("crash"):
        # A PV guest's compact file is a Xen kdump file to crash, which starts
        # no backtrace of an active task without a panic task there unless
        # asked for -t (x86_64.c x86_64_get_dumpfile_stack_frame; xen-dump-core(5)).
        bt = "bt -t" if kind == "mach" else "bt"
        if crash_sys_log_bt(name, files["zstd"], vmlinux, release, os.path.join(out, f"{name}-d31-crash"),
                            problems, bt) != "FAIL":
            readers.append("crash")
    py = "/usr/bin/python3"
    if os.path.exists(py) and subprocess.run([py, "-c", "import kdumpfile"], capture_output=True).returncode == 0:
        pairs = os.path.join(out, f"{name}-d31-frames.bin")
        pages = ours.sections[".xen_pages"]["offset"]
        with open(pairs, "wb") as f:
            for frame in sorted(kept):
                f.write(struct.pack("<QQ", frame, pages + ours.index[to_pfn[frame]] * PAGE))
        for comp, path in files.items():
            r = subprocess.run([py, "-c", LIBKDUMPFILE_READ, path, v1, pairs, kind], capture_output=True, text=True)
            if r.returncode != 0:
                problems.append(f"{name}: libkdumpfile on the level 31 {comp} file: {(r.stdout + r.stderr).strip()[-300:]}")
                break
        else:
            readers.append("libkdumpfile")
        os.remove(pairs)
    want = None
    for line in _vmcoreinfo_text(ours).splitlines():
        if line.startswith("SYMBOL(init_uts_ns)="):
            want = int(line.split("=", 1)[1], 16)
    if want is not None and subprocess.run([sys.executable, "-c", "import drgn"], capture_output=True).returncode == 0:
        d = subprocess.run([sys.executable, "-c", DRGN_READ, files["zstd"], "%x" % want], capture_output=True,
                           text=True)
        if d.returncode == 0 and d.stdout.strip() == "Linux":
            readers.append("drgn")
        elif kind == "mach":
            NOTES.append(f"{name}: drgn does not read a PV guest's compact dump: {d.stderr.strip()[-160:]}")
        else:
            problems.append(f"{name}: drgn could not read init_uts_ns from the level 31 file: {d.stderr.strip()[-300:]}")
    row["d31 readers"] = " ".join(readers) or "-"


def print_dump_times():
    """xen-dumpd's dump time per page of each guest, and each against PV's."""
    if not DUMP_TIMES:
        return
    per_page = {name: secs / pages for name, (secs, pages) in DUMP_TIMES.items()}
    line = ", ".join(f"{name} {1e6 * us:.1f} us ({DUMP_TIMES[name][1]} pages in {DUMP_TIMES[name][0]:.2f} s)"
                     for name, us in per_page.items())
    print("xen-dumpd dump time per page: " + line)
    if "pv" in per_page:
        others = [f"{name} {per_page[name] / per_page['pv']:.2f}x" for name in per_page if name != "pv"]
        if others:
            print("  per page against pv: " + ", ".join(others))


def print_compact_sizes():
    """Issue 18 benchmark (c), in BENCHMARKS.md's table form."""
    if not COMPACT:
        return
    print()
    print("Level 31 (xen-dump-convert --format kdump --dump-level 31) vs the v1 dump, per guest:")
    print("| guest | pages in v1 | kept at level 31 | v1 bytes | level 31 zstd bytes | zstd/v1 | level 31 zlib bytes | zlib/v1 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, pages, kept, v1, zstd, zlib in COMPACT:
        print(f"| {name} | {pages} | {kept} | {v1} | {zstd} | {100.0 * zstd / v1:.1f}% | {zlib} | {100.0 * zlib / v1:.1f}% |")


def print_table(rows):
    columns = ["guest", "pages", "equal/compared", "verify", "convert", "ours s", "xl s", "xl/ours", "kernel", "dmesg",
               "drgn", "vs vmlinux", "crash", "bt", "d31 kept", "vs makedumpfile", "d31 readers"]
    widths = {c: max(len(c), *(len(str(r.get(c, "-"))) for r in rows)) for c in columns}
    print(" | ".join(c.ljust(widths[c]) for c in columns))
    print("-+-".join("-" * widths[c] for c in columns))
    for r in rows:
        print(" | ".join(str(r.get(c, "-")).ljust(widths[c]) for c in columns))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="what dom0 sent back")
    parser.add_argument("--bin", required=True, help="where xen-dumpctl and xen-dump-convert are")
    parser.add_argument("--work", required=True)
    parser.add_argument("--guests", default="pv pvh hvm")
    parser.add_argument("--xl", default="1")
    parser.add_argument("--service", default="1")
    parser.add_argument("--stage-times", default="")
    parser.add_argument("--summary", default="", help="write passed=N failed=N (one per table row) here")
    parser.add_argument("--s3-env", default="", help="the host's S3 store (tests/xen-lab/run): check what dom0 uploaded")
    args = parser.parse_args()
    env = read_env(os.path.join(args.out, "results.env"))
    tools = {"xen-dumpctl": os.path.join(args.bin, "xen-dumpctl"),
             "xen-dump-convert": os.path.join(args.bin, "xen-dump-convert")}
    rows, problems = [], []
    passed = failed = 0
    for name in args.guests.split():
        row, found = check_guest(name, args, env, tools)
        rows.append(row)
        problems += found
        passed, failed = (passed + 1, failed) if not found else (passed, failed + 1)
    for name in args.guests.split():
        row, found = check_live(name, args, env, tools)
        rows.append(row)
        problems += found
        passed, failed = (passed + 1, failed) if not found else (passed, failed + 1)
    if args.service == "1":
        row, found = check_service(args, env, tools)
        rows.append(row)
        problems += found
        passed, failed = (passed + 1, failed) if not found else (passed, failed + 1)
        row, found = check_service_encrypted(args, env, tools)
        rows.append(row)
        problems += found
        passed, failed = (passed + 1, failed) if not found else (passed, failed + 1)
        if args.s3_env:
            row, found = check_store(args, env, tools)
            rows.append(row)
            problems += found
            passed, failed = (passed + 1, failed) if not found else (passed, failed + 1)
    if args.summary:
        with open(args.summary, "w") as f:
            f.write(f"passed={passed}\nfailed={failed}\n")
    print()
    print_table(rows)
    print_dump_times()
    if LIVE:
        print("live dumps (issue 35):")
        for line in LIVE:
            print("  " + line)
    if STORE:
        print("object storage (issue 34):")
        for line in STORE:
            print("  " + line)
    times = read_env(args.stage_times) if args.stage_times else {}
    print()
    print("Xen capabilities: " + env.get("xen.caps", "?").replace("+", " "))
    print("dom0 /init at uptime {} s, toolstack ready at {} s; VM run {} s in all".format(
        env.get("dom0.uptime_at_init", "?"), env.get("dom0.toolstack_ready", "?"), times.get("vm.secs", "?")))
    print("stages: " + ", ".join(f"{k[6:-5]} {v} s" for k, v in times.items() if k.startswith("stage.")))
    if SYSTEMD:
        print()
        print("systemd (dom0): " + SYSTEMD.get("dom0", "?"))
        print("xen-dumpd.service: " + SYSTEMD.get("unit", "?"))
        print("systemd-analyze security xen-dumpd: " + SYSTEMD.get("security", "?"))
        print("xen-dumpctl list as nobody: " + SYSTEMD.get("unprivileged", "?"))
        if "journal" in SYSTEMD:
            print("journal entry of the crash dump (journalctl -o json, selected fields):")
            print(SYSTEMD["journal"])
    for note in NOTES:
        print("note: " + note)
    print()
    print_compact_sizes()
    if problems:
        print(f"FAILED: {len(problems)} problem(s)")
        for p in problems:
            print("  - " + p)
        return 1
    print("PASSED: every page, pfn, gmfn and vcpu context equal; every dump verifies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
