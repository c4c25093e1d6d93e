// Issue 34 item 6: the flattened stream of a compact dump with other
// people's tools, on the real RAM fixture (Debian 6.1 x86_64) as an HVM
// guest of the simulated host: Debian's makedumpfile -R rearranges our
// stream into the very file we write (zlib, lzo and no compression: what
// its makedumpfile reads), whose log makedumpfile --dump-dmesg prints;
// xen-dumpctl reads the stream itself; the command line's pipeline
// (xen-dumpd -o - | makedumpfile -R, | xen-dump-convert -); makedumpfile -F's
// own streams read in place. Each part that needs makedumpfile skips
// cleanly when it is not installed.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "dump_support.hpp"
#include "reader/spec_of.hpp"
#include "xendump/dumper.hpp"
#include "xendump/fd.hpp"
#include "xendump/kdump.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint32_t kDomid = 23;

bool have(const std::string& program) { return run({"sh", "-c", "command -v " + program}).exit_code == 0; }

// The fixture's RAM as a simulated HVM guest, and its v1 dump.
struct Fixture {
    TempDir dir;
    fs::path image = dir / "linux.raw";
    fs::path v1 = dir / "linux.v1.core";
    std::unique_ptr<sim::Host> host = dump::fixture_ram_host(image, kDomid);

    Fixture() { dump_domain_to_file(*host->hv, kDomid, v1, DumpOptions{}); }
};

Fixture& fixture() {
    static Fixture f;
    return f;
}

// The v1 dump's guest written again as a compact file, the same spec and
// pages twice: into a file (write_kdump_file) and as a stream into
// another (write_kdump_flattened, a regular file written front to back).
struct Written {
    fs::path file, stream;
};

Written write_both(const fs::path& dir, Compression c) {
    DumpReader reader = DumpReader::open(fixture().v1);
    const DumpSpec spec = reader::spec_of(reader);
    KdumpOptions o;
    o.compression = c;
    o.write.guest_kernel = true;
    o.write.threads = 2;
    const std::string name = "linux-" + std::string(to_string(c));
    Written w{dir / (name + ".kdump"), dir / (name + ".flat")};
    auto pages = reader.page_source();
    write_kdump_file(w.file, spec, *pages, o);
    UniqueFd fd(::open(w.stream.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    auto again = reader.page_source();
    const WriteResult r = write_kdump_flattened(fd.get(), spec, *again, o);
    EXPECT_EQ(r.file_size, fs::file_size(w.stream));
    return w;
}

RunResult sh(const std::string& script, std::vector<std::string> args) {
    std::vector<std::string> argv = {"sh", "-c", script};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
}

std::string makedumpfile_dmesg(const fs::path& dump, const fs::path& out) {
    fs::remove(out);
    RunResult m = run({"makedumpfile", "--dump-dmesg", dump.string(), out.string()});
    EXPECT_EQ(m.exit_code, 0) << dump << ": " << m.out << m.err;
    return slurp_text(out);
}

// makedumpfile -R makes our file of our stream, byte for byte, for each
// compression Debian's makedumpfile reads; its --dump-dmesg then prints the
// log of the rearranged file as of ours, and xen-dumpctl prints the same
// from the stream itself.
TEST(FlattenedInterop, MakedumpfileRearrangesOurStreamIntoOurFile) {
    if (!have("makedumpfile")) GTEST_SKIP() << "makedumpfile is not installed";
    for (Compression c : {Compression::zlib, Compression::lzo, Compression::none}) {
        SCOPED_TRACE(std::string(to_string(c)));
        TempDir dir;
        const Written w = write_both(dir.path(), c);
        const fs::path theirs = dir / "rearranged.kdump";
        RunResult r = sh("makedumpfile -R \"$0\" < \"$1\"", {theirs.string(), w.stream.string()});
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        EXPECT_TRUE(slurp(theirs) == slurp(w.file)) << "makedumpfile -R did not make our file of our stream";
        const std::string log = makedumpfile_dmesg(theirs, dir / "theirs.txt");
        EXPECT_NE(log.find("Linux version 6.1.0-57-amd64"), std::string::npos);
        EXPECT_EQ(log, makedumpfile_dmesg(w.file, dir / "ours.txt"));
        RunResult d = run({"xen-dumpctl", "dmesg", w.stream.string()});
        ASSERT_EQ(d.exit_code, 0) << d.err;
        EXPECT_EQ(d.out, run({"xen-dumpctl", "dmesg", w.file.string()}).out);
        std::cout << "[ measured ] " << to_string(c) << ": file " << fs::file_size(w.file) << " bytes, stream "
                  << fs::file_size(w.stream) << " bytes\n";
    }
}

// A command's output without the lines naming the file and the time taken.
std::string but_source_and_time(const std::string& out) {
    std::istringstream in(out);
    std::string kept;
    for (std::string line; std::getline(in, line);)
        if (!line.starts_with("Source:") && !line.starts_with("Classified in")) kept += line + "\n";
    return kept;
}

// xen-dumpctl on the stream as on the file: info (saying it is flattened),
// verify, backtrace, estimate; and zstd, which makedumpfile does not read.
TEST(FlattenedInterop, XenDumpctlReadsTheStream) {
    TempDir dir;
    const Written w = write_both(dir.path(), Compression::zstd);
    RunResult info = run({"xen-dumpctl", "info", w.stream.string()});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    EXPECT_NE(info.out.find("Flattened:    makedumpfile's flattened format"), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("Kernel:       6.1.0-57-amd64"), std::string::npos) << info.out;
    RunResult j = run({"xen-dumpctl", "info", "--json", w.stream.string()});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    const json doc = json::parse(j.out);
    EXPECT_EQ(doc.at("flattened").at("stored_size").get<uint64_t>(), fs::file_size(w.stream));
    EXPECT_GT(doc.at("flattened").at("records").get<uint64_t>(), 2u);
    RunResult v = run({"xen-dumpctl", "verify", w.stream.string()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    EXPECT_NE(v.out.find(": OK"), std::string::npos) << v.out;
    for (const std::vector<std::string>& verb : {std::vector<std::string>{"backtrace"}, {"estimate"}}) {
        std::vector<std::string> a = {"xen-dumpctl"}, b;
        a.insert(a.end(), verb.begin(), verb.end());
        b = a;
        a.push_back(w.stream.string());
        b.push_back(w.file.string());
        RunResult on_stream = run(a), on_file = run(b);
        EXPECT_EQ(on_stream.exit_code, on_file.exit_code) << verb[0] << ": " << on_stream.err;
        EXPECT_EQ(but_source_and_time(on_stream.out), but_source_and_time(on_file.out)) << verb[0];
    }
}

// info names who reads the stream itself (ctl/compact_readers.hpp): crash,
// which reads makedumpfile's flattened format (sys and log here), and our
// tools; libkdumpfile (so drgn) and makedumpfile (but -R) only once it is
// rearranged, which the note says. Installed readers only.
TEST(FlattenedInterop, InfoNamesTheReadersOfTheStream) {
    TempDir dir;
    const Written w = write_both(dir.path(), Compression::zlib);
    RunResult info = run({"xen-dumpctl", "info", "--json", w.stream.string()});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    const json j = json::parse(info.out);
    EXPECT_EQ(j.at("readers"), json::array({"crash", "xen-dumpctl", "xen-dump-convert"})) << info.out;
    EXPECT_NE(j.at("readers_note").get<std::string>().find("libkdumpfile, drgn, makedumpfile once rearranged"),
              std::string::npos)
        << info.out;
    const fs::path vmlinux = "/usr/lib/debug/boot/vmlinux-6.1.0-57-amd64";
    if (have("crash") && fs::exists(vmlinux)) {
        std::ofstream(dir / "cmds") << "sys\nlog\nquit\n";
        RunResult c = run({"timeout", "600", "crash", "-s", "-i", (dir / "cmds").string(), vmlinux.string(),
                           w.stream.string()});
        EXPECT_EQ(c.exit_code, 0) << c.err;
        EXPECT_NE(c.out.find("RELEASE: 6.1.0-57-amd64"), std::string::npos) << c.out << c.err;
        EXPECT_NE(c.out.find("] Linux version 6.1.0-57-amd64"), std::string::npos) << "crash's log";
    }
    if (run({"/usr/bin/python3", "-c", "import kdumpfile"}).exit_code == 0) {
        RunResult k = run({"/usr/bin/python3", "-c", "import kdumpfile, sys; kdumpfile.kdumpfile(sys.argv[1])",
                           w.stream.string()});
        EXPECT_NE(k.exit_code, 0) << "libkdumpfile opened a flattened file: name it in compact_readers.cpp";
    }
    if (have("makedumpfile")) {
        RunResult m = run({"makedumpfile", "--dump-dmesg", w.stream.string(), (dir / "dmesg.txt").string()});
        EXPECT_NE(m.exit_code, 0) << "makedumpfile read a flattened file without -R";
    }
}

// The command line's pipeline, as kdump-tools sends a dump over ssh:
// xen-dumpd --format kdump -o - | makedumpfile -R FILE; the same stream
// through xen-dump-convert - -o FILE and xen-dump-convert STREAM -o FILE
// gives the same file, which verifies.
TEST(FlattenedInterop, XenDumpdToMakedumpfileAndXenDumpConvert) {
    TempDir dir;
    const fs::path stream = dir / "s.flat", by_makedumpfile = dir / "m.kdump", from_stdin = dir / "stdin.kdump",
                   from_file = dir / "file.kdump";
    const std::string dumpd = build_program("xen-dumpd").string();
    const bool mdf = have("makedumpfile");
    const std::string rearrange = mdf ? "makedumpfile -R \"$2\" >/dev/null" : "cat >/dev/null";
    RunResult r = sh("set -e; \"$0\" --host \"$1\" --domain 23 -q --format kdump --compress zlib -o - | tee \"$3\" | " +
                         rearrange,
                     {dumpd, fixture().host->host(), by_makedumpfile.string(), stream.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    r = sh("exec \"$0\" -q - -o \"$1\" < \"$2\"",
           {build_program("xen-dump-convert").string(), from_stdin.string(), stream.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    r = run({"xen-dump-convert", stream.string(), "-o", from_file.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("flattened"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("rearranged;records="), std::string::npos) << r.out;
    EXPECT_TRUE(slurp(from_stdin) == slurp(from_file));
    if (mdf) {
        EXPECT_TRUE(slurp(by_makedumpfile) == slurp(from_file)) << "makedumpfile -R and xen-dump-convert differ";
        EXPECT_NE(makedumpfile_dmesg(by_makedumpfile, dir / "dmesg.txt").find("Linux version"), std::string::npos);
    }
    r = run({"xen-dumpctl", "verify", from_file.string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    DumpReader s = DumpReader::open(stream), f = DumpReader::open(from_file);
    EXPECT_EQ(s.nr_pages(), f.nr_pages());
    EXPECT_EQ(s.file_size(), fs::file_size(from_file));
    // Default name beside the input: NAME.kdump; the stream is left alone.
    r = run({"xen-dump-convert", "-q", stream.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(slurp(dir / "s.flat.kdump") == slurp(from_file));
    EXPECT_TRUE(fs::exists(stream));

    // --flattened (-F) into a file: the same format, published whole.
    const fs::path flat_file = dir / "F.flat";
    r = run({"xen-dumpd", "--host", fixture().host->host(), "--domain", "23", "-q", "--format", "kdump", "-F", "-o",
             flat_file.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    DumpReader ff = DumpReader::open(flat_file);
    ASSERT_TRUE(ff.flattened().has_value());
    EXPECT_TRUE(ff.verify().empty());
    // Refused: -F without --format kdump or without -o; the estimate.
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"-F", "-o", (dir / "x").string()}, {"--format", "kdump", "--flattened"},
          {"--estimate", "-F"}}) {
        std::vector<std::string> a = {"xen-dumpd", "--host", fixture().host->host(), "--domain", "23"};
        a.insert(a.end(), bad.begin(), bad.end());
        RunResult u = run(a);
        EXPECT_EQ(u.exit_code, 2) << u.err;
    }
}

// makedumpfile -F's own streams: of our compact file (re-filtered at level
// 31) and of our v1 file (an ELF vmcore to it), read in place by our readers.
TEST(FlattenedInterop, MakedumpfileFlattenedStreamsReadInPlace) {
    if (!have("makedumpfile")) GTEST_SKIP() << "makedumpfile is not installed";
    TempDir dir;
    const Written w = write_both(dir.path(), Compression::zlib);
    struct Input {
        const char* what;
        fs::path path;
    };
    for (const Input& in : {Input{"compact", w.file}, Input{"v1", fixture().v1}}) {
        SCOPED_TRACE(in.what);
        const fs::path flat = dir / (std::string(in.what) + ".flat"), rearranged = dir / (std::string(in.what) + ".R");
        RunResult m = sh("makedumpfile -F -c -d 31 \"$0\" > \"$1\"", {in.path.string(), flat.string()});
        ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
        m = sh("makedumpfile -R \"$0\" < \"$1\"", {rearranged.string(), flat.string()});
        ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
        DumpReader r = DumpReader::open(flat);
        ASSERT_TRUE(r.flattened().has_value());
        std::cout << "[ measured ] makedumpfile -F of our " << in.what << " file: " << r.flattened()->records
                  << " records in " << r.flattened()->stretches << " stretches, " << r.nr_pages() << " pages\n";
        EXPECT_EQ(r.file_size(), fs::file_size(rearranged));
        DumpReader plain = DumpReader::open(rearranged);
        EXPECT_EQ(r.nr_pages(), plain.nr_pages());
        RunResult info = run({"xen-dumpctl", "info", flat.string()});
        EXPECT_EQ(info.exit_code, 0) << info.err;
        EXPECT_NE(info.out.find("Flattened:"), std::string::npos) << info.out;
        // makedumpfile's file holds no digests of ours.
        RunResult v = run({"xen-dumpctl", "verify", "--allow-no-digests", flat.string()});
        RunResult vr = run({"xen-dumpctl", "verify", "--allow-no-digests", rearranged.string()});
        EXPECT_EQ(v.exit_code, vr.exit_code) << v.out << v.err;
        EXPECT_EQ(run({"xen-dumpctl", "dmesg", flat.string()}).out, run({"xen-dumpctl", "dmesg", rearranged.string()}).out);
    }
}

}  // namespace
}  // namespace xendump::test
