// Issue 9 end to end: the real guest RAM fixture (Debian 6.1 x86_64) as an
// HVM guest of the simulated host, dumped with dump_domain_to_file: the dump
// carries the guest's VMCOREINFO (found during the single pass), KERNEL= and
// KERNELOFFSET= in NT_XEN_DOMAIN and one CORE NT_PRSTATUS per vcpu;
// xen-dumpctl info/symbol read the kernel from it; a pattern guest's dump
// carries none of it; the converter adds the same to a converted file.
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <set>
#include <map>
#include <cstdlib>
#include <fstream>
#include <regex>

#include "dump_support.hpp"
#include "guest_ram.hpp"
#include "xendump/dumper.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/reader.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint32_t kDomid = 21;
constexpr uint64_t kFixturePages = (128ULL << 20) / 4096;

// The guest's own vmcoreinfo text, found in the raw RAM image (not in a dump).
const std::string& guest_vmcoreinfo() {
    static const std::string text = [] {
        RamPageSource source(guest_ram());
        auto r = kernel::find_vmcoreinfo(source);
        if (!r) throw std::runtime_error("no vmcoreinfo in the fixture");
        return r->info.text();
    }();
    return text;
}

json fixture_domain(const fs::path& image) {
    json d = dump::hvm_domain(kDomid, "hvm", kFixturePages,
                              json::array({json::array({0, 0x800000, kFixturePages})}));
    d["memory"] = json{{"image", image.string()}};
    return d;
}

// One simulated host with the fixture as guest memory and its dump, shared
// by the tests of this binary (a 128 MiB dump is made once).
struct FixtureDump {
    TempDir dir;
    fs::path image = dir / "linux.raw";
    std::unique_ptr<sim::Host> host;
    fs::path dump = dir / "linux.core";
    DumpResult result;

    explicit FixtureDump(const fs::path& zst) {
        RunResult r = run({"zstd", "-q", "-d", "-o", image.string(), zst.string()});
        if (r.exit_code != 0) throw std::runtime_error("zstd: " + r.err);
        host = std::make_unique<sim::Host>(dump::host_spec({fixture_domain(image)}));
        result = dump_domain_to_file(*host->hv, kDomid, dump);
    }
};

FixtureDump& fixture() {
    static FixtureDump f(shared_dir() / "fixtures" / "linux-6.1-x86_64-128m.raw.zst");
    return f;
}

// The same kernel's RAM, booted with KASLR (tests/fixtures/README.md).
FixtureDump& kaslr_fixture() {
    static FixtureDump f(fs::path(XENDUMP_SOURCE_ROOT) / "tests" / "fixtures" / "linux-6.1-kaslr-x86_64-128m.raw.zst");
    return f;
}

size_t count(const std::string& haystack, const std::string& needle) {
    size_t n = 0;
    for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
    return n;
}

// The notes of the PT_NOTE segment as readelf shows them. readelf prefers
// note sections when a file has any, and notes 5-10 are in no section, so it
// reads a copy of the file's head (ELF header, program headers, notes) with
// the section header fields cleared.
std::string segment_notes(const fs::path& file) {
    DumpReader dump = DumpReader::open(file);
    std::vector<char> head(dump.pages_offset());
    std::ifstream(file, std::ios::binary).read(head.data(), static_cast<std::streamsize>(head.size()));
    const uint64_t shoff = 0;
    const uint16_t zero = 0;
    std::memcpy(head.data() + 40, &shoff, sizeof shoff);  // e_shoff
    std::memcpy(head.data() + 60, &zero, sizeof zero);    // e_shnum
    std::memcpy(head.data() + 62, &zero, sizeof zero);    // e_shstrndx
    TempDir dir;
    const fs::path copy = dir / "head";
    std::ofstream(copy, std::ios::binary).write(head.data(), static_cast<std::streamsize>(head.size()));
    RunResult r = run({"readelf", "--notes", "--wide", copy.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
}

TEST(KernelDump, CarriesTheGuestsVmcoreinfo) {
    FixtureDump& f = fixture();
    DumpReader r = DumpReader::open(f.dump);
    ASSERT_TRUE(r.vmcoreinfo().has_value());
    EXPECT_EQ(*r.vmcoreinfo(), guest_vmcoreinfo());
    EXPECT_TRUE(r.verify().empty());
    RunResult v = run({"xen-dumpctl", "verify", f.dump.string()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

TEST(KernelDump, DomainNoteNamesTheKernel) {
    DumpReader r = DumpReader::open(fixture().dump);
    auto info = kernel::Vmcoreinfo::parse(guest_vmcoreinfo());
    ASSERT_TRUE(info);
    auto release = r.domain().get(keys::kKernel);
    ASSERT_TRUE(release);
    EXPECT_TRUE(release->starts_with("6.1")) << *release;
    EXPECT_EQ(*release, info->release());
    auto offset = info->value("KERNELOFFSET");
    EXPECT_EQ(r.domain().get(keys::kKernelOffset).has_value(), offset.has_value());
    if (offset) {
        EXPECT_EQ(*r.domain().get(keys::kKernelOffset), *offset);
    }
    // The keys the dumper knew up front are still there.
    EXPECT_EQ(r.domain().get(keys::kDomid), std::to_string(kDomid));
    EXPECT_EQ(r.domain().get(keys::kNrPages), std::to_string(r.nr_pages()));
}

TEST(KernelDump, OnePrstatusNotePerVcpu) {
    FixtureDump& f = fixture();
    DumpReader r = DumpReader::open(f.dump);
    const std::string notes = segment_notes(f.dump);
    EXPECT_EQ(count(notes, "PRSTATUS"), r.vcpus().size()) << notes;
    EXPECT_EQ(count(notes, "VMCOREINFO"), 1u) << notes;
}

// binutils reads the whole file, the reserved room included, without
// complaint. (crash needs a vmlinux to open it; `crash --osrelease` without
// one prints "unknown" for this file: not checked here.)
TEST(KernelDump, ReadelfAcceptsTheFile) {
    FixtureDump& f = fixture();
    // binutils reads the whole file without complaint.
    RunResult e = run({"readelf", "--notes", "--program-headers", "--sections", "--wide", f.dump.string()});
    EXPECT_EQ(e.exit_code, 0);
    EXPECT_EQ(e.err, "");
}

TEST(KernelDump, FileSizeIsThePlannedOne) {
    FixtureDump& f = fixture();
    EXPECT_EQ(fs::file_size(f.dump), f.result.file_size);
    // The same spec without anything found gives the same size: the room is
    // reserved whatever the pass finds.
    DumpReader r = DumpReader::open(f.dump);
    EXPECT_EQ(r.file_size(), f.result.file_size);
}

// The fixture guest's dump written front to back as to a pipe (no seeks).
DumpResult stream_dump(const fs::path& path) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error("cannot create " + path.string());
    DumpResult res = dump_domain_to_fd(*fixture().host->hv, kDomid, fd, false);
    ::close(fd);
    return res;
}

// A stream cannot be patched: the same guest written front to back has the
// same size, verifies, and carries the registers but no VMCOREINFO.
TEST(KernelDump, StreamedDumpKeepsThePadding) {
    FixtureDump& f = fixture();
    TempDir out;
    const fs::path path = out / "streamed.core";
    DumpResult res = stream_dump(path);
    EXPECT_EQ(res.file_size, f.result.file_size);
    EXPECT_EQ(fs::file_size(path), f.result.file_size);
    DumpReader r = DumpReader::open(path);
    EXPECT_FALSE(r.vmcoreinfo().has_value());
    EXPECT_FALSE(r.domain().contains(keys::kKernel));
    EXPECT_TRUE(r.verify().empty());
    EXPECT_EQ(count(segment_notes(path), "PRSTATUS"), r.vcpus().size());
}

TEST(KernelDump, InfoShowsReleaseBannerAndVcpus) {
    FixtureDump& f = fixture();
    auto info = kernel::Vmcoreinfo::parse(guest_vmcoreinfo());
    ASSERT_TRUE(info);
    RunResult t = run({"xen-dumpctl", "info", f.dump.string()});
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_NE(t.out.find("Kernel:       " + std::string(info->release())), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("Banner:       Linux version " + std::string(info->release())), std::string::npos)
        << t.out;
    EXPECT_NE(t.out.find("VCPU 0 IP:"), std::string::npos) << t.out;

    RunResult j = run({"xen-dumpctl", "info", "--json", f.dump.string()});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    json doc = json::parse(j.out);
    const json& k = doc.at("kernel");
    EXPECT_TRUE(k.at("found").get<bool>());
    EXPECT_EQ(k.at("release"), std::string(info->release()));
    EXPECT_TRUE(k.at("banner").get<std::string>().starts_with("Linux version 6.1"));
    EXPECT_TRUE(k.at("vmcoreinfo").get<bool>());
    EXPECT_GT(k.at("symbols").get<size_t>(), 10000u);
    EXPECT_EQ(k.at("vcpu_ips").size(), DumpReader::open(f.dump).vcpus().size());
}

json symbol(const fs::path& dump, const std::string& query, int expect_exit = 0) {
    RunResult r = run({"xen-dumpctl", "symbol", "--json", dump.string(), query});
    EXPECT_EQ(r.exit_code, expect_exit) << query << ": " << r.out << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json();
}

TEST(KernelDump, SymbolLooksUpNamesAndAddresses) {
    FixtureDump& f = fixture();
    auto info = kernel::Vmcoreinfo::parse(guest_vmcoreinfo());
    ASSERT_TRUE(info);

    json banner = symbol(f.dump, "linux_banner");
    ASSERT_FALSE(banner.is_null());
    EXPECT_EQ(banner.at("name"), "linux_banner");
    // vmcoreinfo's own SYMBOL() lines agree with what kallsyms gives.
    if (auto want = info->symbol("init_uts_ns")) {
        json uts = symbol(f.dump, "init_uts_ns");
        EXPECT_EQ(std::stoull(uts.at("address").get<std::string>(), nullptr, 16), *want);
    }

    // A per-cpu variable with and without the old per_cpu__ prefix.
    json rq = symbol(f.dump, "runqueues");
    json rq_prefixed = symbol(f.dump, "per_cpu__runqueues");
    ASSERT_FALSE(rq.is_null());
    ASSERT_FALSE(rq_prefixed.is_null());
    EXPECT_EQ(rq.at("address"), rq_prefixed.at("address"));

    // An address inside linux_banner resolves back to it.
    const uint64_t at = std::stoull(banner.at("address").get<std::string>(), nullptr, 16);
    char query[32];
    std::snprintf(query, sizeof query, "0x%llx", static_cast<unsigned long long>(at + 0x10));
    json back = symbol(f.dump, query);
    EXPECT_EQ(back.at("symbol"), "linux_banner+0x10");

    RunResult text = run({"xen-dumpctl", "symbol", f.dump.string(), "linux_banner"});
    EXPECT_NE(text.out.find(" linux_banner"), std::string::npos) << text.out;
    symbol(f.dump, "no_such_symbol_anywhere", 1);
}

// The program headers of a dump, straight from the file.
std::vector<Elf64_Phdr> program_headers(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    Elf64_Ehdr eh{};
    in.read(reinterpret_cast<char*>(&eh), sizeof eh);
    std::vector<Elf64_Phdr> ph(eh.e_phnum);
    in.seekg(static_cast<std::streamoff>(eh.e_phoff));
    in.read(reinterpret_cast<char*>(ph.data()), static_cast<std::streamsize>(ph.size() * sizeof(Elf64_Phdr)));
    return ph;
}

std::vector<char> file_bytes(const fs::path& file, uint64_t offset, size_t size) {
    std::vector<char> out(size);
    std::ifstream in(file, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(out.data(), static_cast<std::streamsize>(size));
    return out;
}

TEST(KernelDump, KernelImageSegmentMapsTheImageAtItsVirtualAddress) {
    FixtureDump& f = fixture();
    EXPECT_TRUE(f.result.kernel_segment);
    auto info = kernel::Vmcoreinfo::parse(guest_vmcoreinfo());
    ASSERT_TRUE(info);
    DumpReader r = DumpReader::open(f.dump);
    const auto ph = program_headers(f.dump);
    ASSERT_EQ(ph.size(), 1 + r.runs().size() + 1);  // PT_NOTE, the runs, the image
    const Elf64_Phdr& k = ph.back();
    EXPECT_EQ(k.p_type, static_cast<Elf64_Word>(PT_LOAD));
    const uint64_t stext = *info->symbol("_stext");
    EXPECT_EQ(k.p_vaddr, stext & ~uint64_t{0x1fffff});
    EXPECT_EQ(k.p_paddr, k.p_vaddr - 0xffffffff80000000ULL + info->phys_base());
    EXPECT_EQ(k.p_filesz, k.p_memsz);
    // The run segments keep p_vaddr 0.
    for (size_t i = 1; i + 1 < ph.size(); ++i) EXPECT_EQ(ph[i].p_vaddr, 0u) << i;
    // init_uts_ns through the virtual mapping: the guest RAM's bytes, "Linux".
    const uint64_t uts = *info->symbol("init_uts_ns");
    ASSERT_GE(uts, k.p_vaddr);
    ASSERT_LT(uts + 65, k.p_vaddr + k.p_filesz);
    const auto via_segment = file_bytes(f.dump, k.p_offset + (uts - k.p_vaddr), 65);
    const auto in_ram = file_bytes(f.image, k.p_paddr + (uts - k.p_vaddr), 65);
    EXPECT_EQ(via_segment, in_ram);
    EXPECT_EQ(std::string(via_segment.data(), 5), "Linux");
    EXPECT_TRUE(r.verify().empty());
    // The reader and `xen-dumpctl info` name the same segment.
    const auto m = r.kernel_image_mapping();
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->vaddr, k.p_vaddr);
    EXPECT_EQ(m->paddr, k.p_paddr);
    EXPECT_EQ(m->size, k.p_filesz);
    EXPECT_EQ(m->file_offset, k.p_offset);
    RunResult j = run({"xen-dumpctl", "info", "--json", f.dump.string()});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    const json seg = json::parse(j.out).at("kernel").at("image_segment");
    EXPECT_EQ(std::stoull(seg.at("vaddr").get<std::string>(), nullptr, 16), k.p_vaddr) << seg;
    EXPECT_EQ(std::stoull(seg.at("paddr").get<std::string>(), nullptr, 16), k.p_paddr) << seg;
    EXPECT_EQ(seg.at("size").get<uint64_t>(), k.p_filesz);
    RunResult t = run({"xen-dumpctl", "info", f.dump.string()});
    EXPECT_NE(t.out.find("Image PT_LOAD:"), std::string::npos) << t.out;
}

// drgn (python3-drgn) opens the dump as a Linux kernel core and reads a
// kernel virtual address without any debug info.
TEST(KernelDump, DrgnReadsInitUtsNsByItsVirtualAddress) {
    if (run({"/usr/bin/python3", "-c", "import drgn"}).exit_code != 0) GTEST_SKIP() << "python3-drgn is not installed";
    FixtureDump& f = fixture();
    auto info = kernel::Vmcoreinfo::parse(guest_vmcoreinfo());
    ASSERT_TRUE(info);
    const std::string script =
        "import sys, drgn\n"
        "prog = drgn.Program()\n"
        "prog.set_core_dump(sys.argv[1])\n"
        "assert prog.flags & drgn.ProgramFlags.IS_LINUX_KERNEL\n"
        "print(prog.read(int(sys.argv[2], 16), 65).split(b'\\0')[0].decode())\n";
    char addr[32];
    std::snprintf(addr, sizeof addr, "%llx", static_cast<unsigned long long>(*info->symbol("init_uts_ns")));
    RunResult r = run({"/usr/bin/python3", "-c", script, f.dump.string(), addr});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "Linux\n");
}

TEST(KernelDump, VerifyNamesAKernelImageSegmentThatPointsElsewhere) {
    FixtureDump& f = fixture();
    TempDir dir;
    const fs::path copy = dir / "moved.core";
    fs::copy_file(f.dump, copy);
    const auto ph = program_headers(copy);
    Elf64_Phdr k = ph.back();
    k.p_offset += 4096;
    Elf64_Ehdr eh{};
    std::ifstream(copy, std::ios::binary).read(reinterpret_cast<char*>(&eh), sizeof eh);
    const uint64_t at = eh.e_phoff + (ph.size() - 1) * sizeof(Elf64_Phdr);
    {
        std::fstream io(copy, std::ios::in | std::ios::out | std::ios::binary);
        io.seekp(static_cast<std::streamoff>(at));
        io.write(reinterpret_cast<const char*>(&k), sizeof k);
    }
    const auto findings = DumpReader::verify_file(copy);
    ASSERT_EQ(findings.size(), 1u);
    EXPECT_EQ(findings[0].check, "load-kernel-image");
    EXPECT_EQ(findings[0].offset, at);
}

// Debian's linux-image-6.1.0-57-amd64-dbg: the fixture kernel's vmlinux
// with debug info (scripts/install-deps installs it when the archive still
// has it; the tests below skip without it).
fs::path fixture_vmlinux() {
    if (const char* env = std::getenv("XENDUMP_VMLINUX")) return env;
    return "/usr/lib/debug/boot/vmlinux-6.1.0-57-amd64";
}

// crash as its users type it: `crash vmlinux DUMP`, no --kaslr=auto.
RunResult crash_sys_and_log(const fs::path& dump, const fs::path& vmlinux) {
    TempDir dir;
    const fs::path cmds = dir / "cmds";
    std::ofstream(cmds) << "sys\nlog\nquit\n";
    return run({"timeout", "600", "crash", "-s", "-i", cmds.string(), vmlinux.string(), dump.string()});
}

TEST(KernelDump, CrashRunsSysAndLogWithoutFlags) {
    const fs::path vmlinux = fixture_vmlinux();
    if (!fs::exists(vmlinux)) GTEST_SKIP() << vmlinux << " is not installed";
    if (run({"sh", "-c", "command -v crash"}).exit_code != 0) GTEST_SKIP() << "crash is not installed";
    RunResult r = crash_sys_and_log(fixture().dump, vmlinux);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("RELEASE: 6\\.1\\.0-57-amd64"))) << r.out;
    EXPECT_NE(r.out.find("] Linux version 6.1.0-57-amd64"), std::string::npos) << r.out;  // from log
}

// A KASLR guest: crash takes our file for a kdump vmcore (PT_LOAD p_align 0,
// xen-dump-core(5)) and so relocates the kernel by VMCOREINFO's KERNELOFFSET
// by itself. With p_align 4096 it took the file for a netdump one, never read
// KERNELOFFSET, and failed on the first kernel read without --kaslr=auto.
TEST(KernelDump, CrashRelocatesAKaslrGuestWithoutFlags) {
    const fs::path vmlinux = fixture_vmlinux();
    if (!fs::exists(vmlinux)) GTEST_SKIP() << vmlinux << " is not installed";
    if (run({"sh", "-c", "command -v crash"}).exit_code != 0) GTEST_SKIP() << "crash is not installed";
    FixtureDump& f = kaslr_fixture();
    DumpReader d = DumpReader::open(f.dump);
    EXPECT_EQ(d.domain().get(keys::kKernelOffset), "14400000");
    RunResult r = crash_sys_and_log(f.dump, vmlinux);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("RELEASE: 6\\.1\\.0-57-amd64"))) << r.out;
    EXPECT_NE(r.out.find("Kernel panic - not syncing: VFS: Unable to mount root fs"), std::string::npos)
        << r.out;  // from log
    EXPECT_NE(r.out.find("Kernel Offset: 0x14400000"), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find("read error"), std::string::npos) << r.err;
}

// A PV guest's page tables hold machine frames, which crash's ELF reader
// cannot translate ("read error: physical address: ffffffffffffffff type pud
// page" when the program headers follow the ELF header). With them after the
// section headers crash opens the file through its Xen dump reader, which
// translates through .xen_p2m. The guest: Xen 4.17's `xl dump-core` of a real
// PV guest (the fixture), converted to v1.
TEST(KernelConvert, CrashRunsSysAndLogOnAPvGuestsDump) {
    const fs::path vmlinux = fixture_vmlinux();
    if (!fs::exists(vmlinux)) GTEST_SKIP() << vmlinux << " is not installed";
    if (run({"sh", "-c", "command -v crash"}).exit_code != 0) GTEST_SKIP() << "crash is not installed";
    TempDir dir;
    const fs::path xl = dir / "xl-pv.core", v1 = dir / "pv.core", cmds = dir / "cmds";
    RunResult z = run({"zstd", "-q", "-d", "-o", xl.string(),
                       (shared_dir() / "fixtures" / "xl-dump-core-pv-6.1-128m.core.zst").string()});
    ASSERT_EQ(z.exit_code, 0) << z.err;
    RunResult c = run({"xen-dump-convert", "-q", "-o", v1.string(), xl.string()});
    ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
    std::ofstream(cmds) << "sys\nlog\nbt\nquit\n";
    RunResult r = run({"timeout", "600", "crash", "-s", "-i", cmds.string(), vmlinux.string(), v1.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("RELEASE: 6\\.1\\.0-57-amd64"))) << r.out;
    EXPECT_NE(r.out.find("] Linux version 6.1.0-57-amd64"), std::string::npos) << r.out;  // from log
    EXPECT_TRUE(std::regex_search(r.out, std::regex("#0 \\[[0-9a-f]+\\] \\w+ at ffffffff"))) << r.out;  // bt
    EXPECT_EQ(r.err.find("read error"), std::string::npos) << r.err;
}

TEST(KernelDump, SymbolsFoundByShapeEqualTheVmlinuxSymbolTable) {
    const fs::path vmlinux = fixture_vmlinux();
    if (!fs::exists(vmlinux)) GTEST_SKIP() << vmlinux << " is not installed";
    FixtureDump& f = fixture();
    auto info = kernel::Vmcoreinfo::parse(guest_vmcoreinfo());
    ASSERT_TRUE(info);
    const uint64_t shift = info->kernel_offset().value_or(0);
    RunResult nm = run({"nm", vmlinux.string()});
    ASSERT_EQ(nm.exit_code, 0) << nm.err;
    std::map<std::string, std::set<uint64_t>> table;
    std::istringstream nm_lines(nm.out);
    for (std::string line; std::getline(nm_lines, line);) {
        std::istringstream l(line);
        std::string addr, type, name;
        if (l >> addr >> type >> name) table[name].insert(std::stoull(addr, nullptr, 16));
    }
    RunResult ours = run({"xen-dumpctl", "symbol", "--list", f.dump.string()});
    ASSERT_EQ(ours.exit_code, 0) << ours.err;
    size_t checked = 0, mismatched = 0;
    std::string first_bad;
    std::istringstream our_lines(ours.out);
    for (std::string line; std::getline(our_lines, line);) {
        std::istringstream l(line);
        std::string addr, type, name;
        if (!(l >> addr >> type >> name)) continue;
        const uint64_t a = std::stoull(addr, nullptr, 16);
        // Per-cpu offsets ('A' in kallsyms, small values) are not shifted by KASLR.
        const uint64_t unshifted = a >= 0xffffffff80000000ULL ? a - shift : a;
        ++checked;
        auto it = table.find(name);
        if (it == table.end() || !it->second.count(unshifted)) {
            if (mismatched++ == 0) first_bad = line;
        }
    }
    EXPECT_GT(checked, 50000u);
    EXPECT_EQ(mismatched, 0u) << "first: " << first_bad;
}

TEST(KernelDump, PatternGuestHasNoKernel) {
    json d = dump::hvm_domain(22, "hvm", 0x2000, json::array({json::array({0, 0x900000, 0x2000})}));
    sim::Host host(dump::host_spec({d}));
    TempDir out;
    const fs::path path = out / "pattern.core";
    dump_domain_to_file(*host.hv, 22, path);
    DumpReader r = DumpReader::open(path);
    EXPECT_FALSE(r.vmcoreinfo().has_value());
    EXPECT_FALSE(r.domain().contains(keys::kKernel));
    EXPECT_FALSE(r.domain().contains(keys::kKernelOffset));
    EXPECT_TRUE(r.verify().empty());
    EXPECT_EQ(count(segment_notes(path), "VMCOREINFO"), 0u);
    EXPECT_EQ(program_headers(path).size(), 1 + r.runs().size());  // no kernel image segment
    EXPECT_FALSE(r.kernel_image_mapping().has_value());

    RunResult t = run({"xen-dumpctl", "info", path.string()});
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_NE(t.out.find("no Linux kernel found"), std::string::npos) << t.out;
    RunResult s = run({"xen-dumpctl", "symbol", path.string(), "linux_banner"});
    EXPECT_EQ(s.exit_code, 1);
    EXPECT_NE(s.err.find("no Linux kernel symbol table"), std::string::npos) << s.err;
}

// An xl dump-core style (sections only) file of the fixture's pages: the
// streamed v1 dump (no VMCOREINFO: a stream cannot be patched) with its
// program headers removed, which leaves Xen's sections. The converter's
// output carries the VMCOREINFO found in its single pass.
TEST(KernelConvert, ConvertedFileCarriesVmcoreinfo) {
    TempDir out;
    const fs::path xl = out / "xl.core";
    stream_dump(xl);
    {
        int fd = ::open(xl.c_str(), O_WRONLY | O_CLOEXEC);
        ASSERT_GE(fd, 0);
        // e_phoff (offset 32, u64) and e_phnum (offset 56, u16) of Elf64_Ehdr.
        const uint64_t phoff = 0;
        const uint16_t phnum = 0;
        ASSERT_EQ(::pwrite(fd, &phoff, sizeof phoff, 32), 8);
        ASSERT_EQ(::pwrite(fd, &phnum, sizeof phnum, 56), 2);
        ::close(fd);
    }
    ASSERT_EQ(DumpReader::open(xl).format(), FileFormat::xen_elf);
    ASSERT_FALSE(DumpReader::open(xl).vmcoreinfo().has_value());

    const fs::path v1 = out / "converted.core";
    RunResult c = run({"xen-dump-convert", "-q", "-o", v1.string(), xl.string()});
    ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
    DumpReader r = DumpReader::open(v1);
    ASSERT_TRUE(r.vmcoreinfo().has_value()) << run({"xen-dumpctl", "info", v1.string()}).out;
    EXPECT_EQ(*r.vmcoreinfo(), guest_vmcoreinfo());
    EXPECT_TRUE(r.domain().get(keys::kKernel).value_or("").starts_with("6.1"));
    EXPECT_TRUE(r.verify().empty());
    EXPECT_EQ(count(segment_notes(v1), "PRSTATUS"), r.vcpus().size());
}

}  // namespace
}  // namespace xendump::test
