// xen-dump-convert as a program: batches of mixed files, kill -9 and rerun,
// idempotence, --remove-source, --dry-run, bad inputs in a batch, usage errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "dump_check.hpp"
#include "legacy/conversion.hpp"
#include "legacy_gen.hpp"
#include "test_support.hpp"
#include "xendump/fd.hpp"
#include "xendump/reader.hpp"
#include "xl_elf_gen.hpp"

extern char** environ;

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
namespace gen = legacy_gen;

void make_legacy(const fs::path& p, gen::Variant v, unsigned width, uint64_t pfns, uint64_t seed) {
    bool pv = v == gen::Variant::pv_page_list || v == gen::Variant::pv_pfn_order;
    std::vector<uint64_t> holes;
    if (v == gen::Variant::pv_pfn_order || v == gen::Variant::hvm_pfn_order) holes = {1, pfns / 2};
    auto g = gen::make_guest({.width = width, .nr_pfns = pfns, .seed = seed, .hole_pfns = holes, .p2m_tree = pv});
    gen::write_bytes(p, gen::make_file(g, {.variant = v, .tool_width = width, .shuffle_seed = seed}));
}

void make_xl(const fs::path& p, bool hvm, uint64_t pfns, uint64_t seed) {
    xl_elf_gen::XlSpec s{.hvm = hvm, .seed = seed};
    for (uint64_t i = 0; i < pfns; ++i)
        if (i % 50 != 7) s.pfns.push_back(i);
    gen::write_bytes(p, xl_elf_gen::make_xl_core(s));
}

// NAME.v1.core beside NAME.core (the program's default).
std::string legacy_output_name(const fs::path& src) { return src.stem().string() + ".v1.core"; }

bool verifies(const fs::path& p) {
    try {
        return DumpReader::open(p).verify().empty();
    } catch (const std::exception&) {
        return false;
    }
}

std::vector<fs::path> files_under(const fs::path& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

nlohmann::json json_of(const RunResult& r) {
    try {
        return nlohmann::json::parse(r.out);
    } catch (const std::exception& e) {
        ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.out;
        return {};
    }
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

std::map<std::string, nlohmann::json> by_path(const nlohmann::json& doc) {
    std::map<std::string, nlohmann::json> m;
    for (const auto& f : doc["files"]) m[f["path"].get<std::string>()] = f;
    return m;
}

TEST(Batch, KilledMidwayThenRerunConvertsEverythingOnce) {
    TempDir dir;
    auto in = dir / "in";
    fs::create_directories(in / "sub/deeper");
    // 50 files: legacy variants of both widths, xl ELF PV and HVM, two v1 files.
    std::vector<fs::path> sources;
    for (int i = 0; i < 48; ++i) {
        fs::path sub = i % 3 == 0 ? in : i % 3 == 1 ? in / "sub" : in / "sub/deeper";
        fs::path p = sub / ("dump" + std::to_string(i) + ".core");
        uint64_t pfns = 200 + static_cast<uint64_t>(i * 37 % 11) * 150;
        unsigned w = i % 2 ? 4 : 8;
        switch (i % 5) {
        case 0: make_legacy(p, gen::Variant::pv_page_list, w, pfns, 100 + i); break;
        case 1: make_legacy(p, gen::Variant::pv_pfn_order, w, pfns, 100 + i); break;
        case 2: make_legacy(p, gen::Variant::hvm_pfn_order, w, pfns, 100 + i); break;
        case 3: make_xl(p, false, pfns, 100 + i); break;
        case 4: make_xl(p, true, pfns, 100 + i); break;
        }
        sources.push_back(p);
    }
    // Two files already in the v1 format.
    for (int i = 0; i < 2; ++i) {
        auto tmp = dir / ("v1src" + std::to_string(i) + ".core");
        make_legacy(tmp, gen::Variant::pv_page_list, 8, 300, 900 + i);
        legacy::convert_file(tmp, in / ("current" + std::to_string(i) + ".v1.core"), {});
    }
    ASSERT_EQ(files_under(in).size(), 50u);

    // First run, killed as soon as some output has appeared.
    std::vector<std::string> args = {build_program("xen-dump-convert").string(), "-j", "2", "-q", in.string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    bool exited = false;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            exited = true;
            break;
        }
        size_t outputs = 0;
        for (const auto& f : files_under(in))
            if (f.filename().string().ends_with(".v1.core") && !f.filename().string().starts_with("current")) ++outputs;
        if (outputs >= 3) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
    // Whatever is visible under a final name verifies.
    for (const auto& f : files_under(in))
        if (f.filename().string().ends_with(".v1.core")) {
            EXPECT_TRUE(verifies(f)) << f;
        }

    // Rerun finishes the job.
    auto r = run({"xen-dump-convert", "-j", "2", "--json", in.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    auto doc = json_of(r);
    auto files = by_path(doc);
    size_t converted_now = 0, already = 0;
    for (const auto& src : sources) {
        ASSERT_TRUE(files.count(src.string())) << src;
        const auto& f = files[src.string()];
        auto out = src.parent_path() / legacy_output_name(src);
        EXPECT_TRUE(fs::exists(out)) << out;
        EXPECT_TRUE(verifies(out)) << out;
        std::string result = f["result"];
        if (result == "converted") {
            ++converted_now;
            EXPECT_EQ(f["output"], out.string());
            EXPECT_GT(f["pages"].get<uint64_t>(), 0u);
            EXPECT_FALSE(f["layout"].get<std::string>().empty());
        } else {
            EXPECT_EQ(result, "skipped") << f.dump();
            EXPECT_EQ(f["reason"], "already converted");
            ++already;
        }
        std::string fmt = f["format"];
        EXPECT_TRUE(fmt == "xc_core" || fmt == "xen-elf") << fmt;
    }
    EXPECT_EQ(converted_now + already, 48u);
    if (!exited) {
        EXPECT_GT(converted_now, 0u) << "the killed run cannot have finished everything";
    }
    for (int i = 0; i < 2; ++i) {
        const auto& f = files[(in / ("current" + std::to_string(i) + ".v1.core")).string()];
        EXPECT_EQ(f["result"], "skipped");
        EXPECT_EQ(f["format"], "v1");
    }
    EXPECT_EQ(doc["summary"]["failed"], 0);
    // No temporary left anywhere, and exactly sources + outputs + v1 files.
    for (const auto& f : files_under(in))
        EXPECT_FALSE(f.filename().string().starts_with(AtomicFile::kTempPrefix)) << f;
    EXPECT_EQ(files_under(in).size(), 48u * 2 + 2);

    // A third run converts nothing and says so.
    auto again = run({"xen-dump-convert", "-j", "2", in.string()});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("0 converted"), std::string::npos) << again.out;
    EXPECT_NE(again.out.find("nothing to convert"), std::string::npos) << again.out;
}

TEST(Batch, BadInputsFailAloneAndTheBatchGoesOn) {
    TempDir dir;
    make_legacy(dir / "good.core", gen::Variant::pv_page_list, 8, 300, 1);
    make_legacy(dir / "truncated.core", gen::Variant::pv_page_list, 8, 300, 2);
    fs::resize_file(dir / "truncated.core", fs::file_size(dir / "truncated.core") - 5000);
    // An xc_core magic, then garbage: a dump, but a broken one (a file of no
    // known format at all is skipped: UnrecognisedFilesAreSkippedNotFailed).
    std::vector<std::byte> garbage(10000, std::byte{0x5a});
    const uint32_t magic = 0xF00FEBED;
    std::memcpy(garbage.data(), &magic, sizeof magic);
    gen::write_bytes(dir / "garbage.core", garbage);
    auto r = run({"xen-dump-convert", "--json", (dir / "truncated.core").string(), (dir / "garbage.core").string(),
                  (dir / "good.core").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(fs::exists(dir / "good.v1.core"));
    EXPECT_FALSE(fs::exists(dir / "truncated.v1.core"));
    EXPECT_FALSE(fs::exists(dir / "garbage.v1.core"));
    // One line per bad file on stderr, naming it and the offset.
    EXPECT_NE(r.err.find((dir / "truncated.core").string() + ": at offset 0x"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find((dir / "garbage.core").string()), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
    auto files = by_path(json_of(r));
    EXPECT_EQ(files[(dir / "truncated.core").string()]["result"], "failed");
    EXPECT_NE(files[(dir / "truncated.core").string()]["error"].get<std::string>().find("truncated"), std::string::npos);
    EXPECT_EQ(files[(dir / "good.core").string()]["result"], "converted");
}

// Issue 36 item 4: on a terminal the report's DETAIL column is cut to the
// terminal's width (libsmartcols); on a pipe, and in --json, it is whole.
TEST(Batch, TheDetailColumnFitsTheTerminalAndIsWholeOnAPipe) {
    TempDir dir;
    const fs::path bad = dir / "t.core";
    make_legacy(bad, gen::Variant::pv_page_list, 8, 300, 2);
    fs::resize_file(bad, fs::file_size(bad) - 5000);
    const std::vector<std::string> args = {build_program("xen-dump-convert").string(), "--dry-run", bad.string()};
    auto piped = run(args);
    EXPECT_EQ(piped.exit_code, 1) << piped.err;
    const auto whole = piped.out.find("truncated");
    ASSERT_NE(whole, std::string::npos) << piped.out;
    size_t longest_piped = 0;
    for (const auto& l : lines_of(piped.out)) longest_piped = std::max(longest_piped, l.size());
    ASSERT_GT(longest_piped, 100u) << "the error is long enough to need cutting at 72 columns:\n" << piped.out;

    // The same on a terminal of 72 columns (script(1) gives it a pty).
    std::string command = "stty cols 72 rows 24 && exec";
    for (const auto& a : args) command += " '" + a + "'";
    command += " 2>/dev/null";  // the progress bar and the error line: the table alone
    auto tty = run({"/usr/bin/script", "-qec", command, "/dev/null"});
    EXPECT_EQ(tty.exit_code, 1) << tty.err;
    ASSERT_NE(tty.out.find("FILE"), std::string::npos) << tty.out;
    for (auto l : lines_of(tty.out)) {
        if (!l.empty() && l.back() == '\r') l.pop_back();
        // Columns, not bytes: an ellipsis is 3 bytes of UTF-8.
        size_t columns = 0;
        for (unsigned char c : l) columns += (c & 0xc0) != 0x80;
        EXPECT_LE(columns, 72u) << "a line wider than the terminal: " << l;
    }
}

TEST(Batch, RemoveSourceOnlyAfterVerification) {
    TempDir dir;
    make_legacy(dir / "a.core", gen::Variant::pv_page_list, 8, 300, 3);
    make_legacy(dir / "notree.core", gen::Variant::hvm_page_list, 8, 300, 4);  // refused without opt-in
    auto r = run({"xen-dump-convert", "--remove-source", (dir / "a.core").string(), (dir / "notree.core").string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_FALSE(fs::exists(dir / "a.core"));
    EXPECT_TRUE(verifies(dir / "a.v1.core"));
    EXPECT_TRUE(fs::exists(dir / "notree.core")) << "a failed file's source must stay";
    EXPECT_NE(r.err.find("--allow-inferred-layout"), std::string::npos) << r.err;
}

// The SOURCE_ID= an output records (empty when none).
std::string source_id_of(const fs::path& output) {
    return DumpReader::open(output).domain().get(keys::kSourceId).value_or("");
}

void set_mtime(const fs::path& p, time_t seconds) {
    const timespec times[2] = {{seconds, 0}, {seconds, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), times, 0), 0) << p;
}

// Issue 16.1: web01.core and web01 both map to web01.v1.core. Neither may be
// taken for the other's conversion, and neither source may go.
TEST(Batch, TwoInputsOfOneOutputNameAreRefusedAndBothSourcesKept) {
    TempDir dir;
    make_legacy(dir / "web01.core", gen::Variant::pv_page_list, 8, 300, 40);
    make_legacy(dir / "web01", gen::Variant::pv_page_list, 8, 400, 41);
    auto r = run({"xen-dump-convert", "--remove-source", "--json", dir.path().string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_TRUE(fs::exists(dir / "web01.core"));
    EXPECT_TRUE(fs::exists(dir / "web01"));
    EXPECT_FALSE(fs::exists(dir / "web01.v1.core")) << "which of the two would it be?";
    // Each failure names both inputs and the output they share.
    auto files = by_path(json_of(r));
    for (auto [name, other] : {std::pair{"web01.core", "web01"}, std::pair{"web01", "web01.core"}}) {
        const auto& f = files[(dir / name).string()];
        EXPECT_EQ(f["result"], "failed") << f.dump();
        const std::string error = f["error"];
        EXPECT_TRUE(error.starts_with((dir / name).string() + ": this file and " + (dir / other).string() +
                                      " would both be converted to " + (dir / "web01.v1.core").string() +
                                      "; neither is converted"))
            << error;
    }
}

TEST(Batch, TwoInputsOfOneNameIntoAnOutputDirAreRefused) {
    TempDir dir;
    fs::create_directories(dir / "a");
    fs::create_directories(dir / "b");
    make_legacy(dir / "a/db.core", gen::Variant::pv_page_list, 8, 300, 42);
    make_xl(dir / "b/db.core", false, 300, 43);
    make_legacy(dir / "a/other.core", gen::Variant::pv_page_list, 4, 300, 44);
    auto r = run({"xen-dump-convert", "--remove-source", "--output-dir", (dir / "out").string(),
                  (dir / "a/db.core").string(), (dir / "b/db.core").string(), (dir / "a/other.core").string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_TRUE(fs::exists(dir / "a/db.core"));
    EXPECT_TRUE(fs::exists(dir / "b/db.core"));
    EXPECT_FALSE(fs::exists(dir / "out/db.core"));
    EXPECT_NE(r.err.find((dir / "a/db.core").string() + ": this file and " + (dir / "b/db.core").string()),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find((dir / "b/db.core").string() + ": this file and " + (dir / "a/db.core").string()),
              std::string::npos)
        << r.err;
    // The rest of the batch is converted as usual.
    EXPECT_TRUE(verifies(dir / "out/other.core"));
    EXPECT_FALSE(fs::exists(dir / "a/other.core"));
}

// An output left by another dump under the same name is not "already
// converted": neither skipped as done nor a reason to delete the source.
TEST(Batch, StaleOutputOfAnotherDumpIsNeitherTakenNorAReasonToRemove) {
    TempDir dir;
    const fs::path src = dir / "web01.core", out = dir / "web01.v1.core";
    make_legacy(src, gen::Variant::pv_page_list, 8, 300, 45);
    set_mtime(src, 1'600'000'000);
    auto first = run({"xen-dump-convert", "-q", src.string()});
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const std::string id = source_id_of(out);
    EXPECT_TRUE(id.starts_with("size=" + std::to_string(fs::file_size(src)) + ";mtime=1600000000.000000000;digest=xxh3-128:"))
        << id;

    // The same source again: already converted, and then removable.
    fs::copy_file(src, dir / "keep.bin");
    auto again = run({"xen-dump-convert", "--json", "--remove-source", src.string()});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(by_path(json_of(again))[src.string()]["reason"], "already converted");
    EXPECT_FALSE(fs::exists(src));

    // A newer dump of the guest under the old name: the output is not its.
    make_legacy(src, gen::Variant::pv_page_list, 8, 300, 46);
    auto newer = run({"xen-dump-convert", "--json", "--remove-source", src.string()});
    EXPECT_EQ(newer.exit_code, 1) << newer.out;
    EXPECT_TRUE(fs::exists(src)) << "the newer dump was never converted";
    const std::string error = by_path(json_of(newer))[src.string()]["error"];
    EXPECT_NE(error.find("converted from another file"), std::string::npos) << error;
    EXPECT_NE(error.find("not overwritten"), std::string::npos) << error;
    EXPECT_EQ(source_id_of(out), id) << "the old output is left alone";

    // The same bytes as the converted dump, but touched since: not shown to be it.
    fs::remove(src);
    fs::copy_file(dir / "keep.bin", src);
    set_mtime(src, 1'600'000'001);
    auto touched = run({"xen-dump-convert", "--remove-source", src.string()});
    EXPECT_EQ(touched.exit_code, 1);
    EXPECT_TRUE(fs::exists(src));
    EXPECT_NE(touched.err.find("modification time 1600000001.000000000, recorded 1600000000.000000000"),
              std::string::npos)
        << touched.err;
    // Back to the recorded time: it is the source again.
    set_mtime(src, 1'600'000'000);
    EXPECT_EQ(run({"xen-dump-convert", "--remove-source", src.string()}).exit_code, 0);
    EXPECT_FALSE(fs::exists(src));
}

// A v1 file at the output name that does not say where it came from (a
// service dump, an older converter's output) proves nothing either.
TEST(Batch, OutputWithoutASourceIdentityIsNotTakenForTheConversion) {
    TempDir dir;
    const fs::path src = dir / "web01.core", out = dir / "web01.v1.core";
    make_legacy(src, gen::Variant::pv_page_list, 8, 300, 47);
    std::vector<uint64_t> pfns;
    for (uint64_t pfn = 0; pfn < 200; ++pfn) pfns.push_back(pfn);
    PatternPageSource pages(entries_for(pfns, format::GuestType::hvm), 3);
    write_dump_file(out, make_spec(format::GuestType::hvm, 8, 1), pages);
    ASSERT_TRUE(verifies(out));
    auto r = run({"xen-dump-convert", "--remove-source", src.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(fs::exists(src));
    EXPECT_NE(r.err.find("does not record which file it was converted from"), std::string::npos) << r.err;
}

// Issue 16.9: a FIFO is refused at once (not opened for reading, which waits
// for a writer forever); the rest of the batch goes on. timeout(1) only
// bounds the old behaviour.
TEST(Batch, FifoIsRefusedWithoutWaiting) {
    TempDir dir;
    make_legacy(dir / "good.core", gen::Variant::pv_page_list, 8, 300, 48);
    fs::create_directories(dir / "d");
    ASSERT_EQ(mkfifo((dir / "named.core").c_str(), 0600), 0);
    ASSERT_EQ(mkfifo((dir / "d/inside.core").c_str(), 0600), 0);
    auto r = run({"/usr/bin/timeout", "30", build_program("xen-dump-convert").string(), "--json",
                  (dir / "named.core").string(), (dir / "good.core").string(), (dir / "d").string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find((dir / "named.core").string() + ": not a regular file: it is a FIFO"), std::string::npos)
        << r.err;
    auto files = by_path(json_of(r));
    EXPECT_EQ(files[(dir / "named.core").string()]["result"], "failed");
    EXPECT_EQ(files[(dir / "good.core").string()]["result"], "converted");
    // Found in a directory, it is not a dump to convert: skipped, with why.
    EXPECT_EQ(files[(dir / "d/inside.core").string()]["result"], "skipped");
    EXPECT_EQ(files[(dir / "d/inside.core").string()]["reason"], "not a regular file: it is a FIFO");

    // A FIFO where the output would go is not opened either.
    make_legacy(dir / "web01.core", gen::Variant::pv_page_list, 8, 300, 53);
    ASSERT_EQ(mkfifo((dir / "web01.v1.core").c_str(), 0600), 0);
    auto out = run({"/usr/bin/timeout", "30", build_program("xen-dump-convert").string(), "--remove-source",
                    (dir / "web01.core").string()});
    EXPECT_EQ(out.exit_code, 1) << out.err;
    EXPECT_NE(out.err.find("exists but is not a regular file: it is a FIFO"), std::string::npos) << out.err;
    EXPECT_TRUE(fs::exists(dir / "web01.core"));
}

TEST(Batch, SymlinkLoopFailsItsEntryAndTheBatchGoesOn) {
    TempDir dir;
    make_legacy(dir / "a.core", gen::Variant::pv_page_list, 8, 300, 49);
    make_xl(dir / "b.core", true, 300, 50);
    fs::create_symlink("loop.core", dir / "loop.core");
    fs::create_symlink("ping", dir / "pong");
    fs::create_symlink("pong", dir / "ping");
    auto r = run({"xen-dump-convert", "--json", dir.path().string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    auto files = by_path(json_of(r));
    for (const char* name : {"loop.core", "ping", "pong"}) {
        const auto& f = files[(dir / name).string()];
        EXPECT_EQ(f["result"], "failed") << name;
        EXPECT_NE(f["error"].get<std::string>().find("cannot follow the symbolic link: Too many levels"),
                  std::string::npos)
            << f.dump();
    }
    EXPECT_EQ(files[(dir / "a.core").string()]["result"], "converted");
    EXPECT_EQ(files[(dir / "b.core").string()]["result"], "converted");
    EXPECT_TRUE(verifies(dir / "a.v1.core"));
    EXPECT_TRUE(verifies(dir / "b.v1.core"));
}

// Issue 21.4: sidecars and text beside the dumps are no failures; exit 0
// says nothing failed, 1 that something did.
TEST(Batch, UnrecognisedFilesAreSkippedNotFailed) {
    TempDir dir;
    make_legacy(dir / "web01.core", gen::Variant::pv_page_list, 8, 300, 51);
    auto text = [&](const char* name, const std::string& body) {
        gen::write_bytes(dir / name, std::vector<std::byte>(reinterpret_cast<const std::byte*>(body.data()),
                                                             reinterpret_cast<const std::byte*>(body.data() + body.size())));
    };
    text("web01.core.json", "{\"DOMID\": \"3\", \"NAME\": \"web01\"}\n");
    text("README.txt", "Old dumps of the web servers, 2009.\n");
    text("empty", "");
    auto r = run({"xen-dump-convert", "--json", dir.path().string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.err, "");
    auto doc = json_of(r);
    auto files = by_path(doc);
    for (const char* name : {"web01.core.json", "README.txt", "empty"}) {
        const auto& f = files[(dir / name).string()];
        EXPECT_EQ(f["result"], "skipped") << f.dump();
        EXPECT_EQ(f["format"], "unknown");
        EXPECT_NE(f["reason"].get<std::string>().find("not a Xen dump"), std::string::npos) << f.dump();
    }
    EXPECT_EQ(files[(dir / "web01.core").string()]["result"], "converted");
    EXPECT_EQ(doc["summary"]["failed"], 0);
    EXPECT_EQ(doc["summary"]["skipped"], 3);
    // A dump that cannot be converted makes it 1; the table says why.
    make_legacy(dir / "broken.core", gen::Variant::pv_page_list, 8, 300, 52);
    fs::resize_file(dir / "broken.core", 4096);
    auto failed = run({"xen-dump-convert", dir.path().string()});
    EXPECT_EQ(failed.exit_code, 1) << failed.out;
    EXPECT_NE(failed.out.find("1 failed"), std::string::npos) << failed.out;
}

TEST(Batch, DryRunWritesNothing) {
    TempDir dir;
    make_legacy(dir / "a.core", gen::Variant::pv_page_list, 4, 300, 5);
    auto r = run({"xen-dump-convert", "--dry-run", "--json", dir.path().string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(files_under(dir.path()).size(), 1u);
    auto f = by_path(json_of(r))[(dir / "a.core").string()];
    EXPECT_EQ(f["result"], "skipped");
    EXPECT_NE(f["layout"].get<std::string>().find("p2m-tree"), std::string::npos) << f.dump();
}

// Issue 36.4: in a batch, a warning names the file it is about (the
// progress of other files runs between them).
TEST(Batch, AWarningNamesItsFile) {
    TempDir dir;
    make_legacy(dir / "a.core", gen::Variant::pv_page_list, 8, 300, 8);
    make_xl(dir / "b.core", false, 300, 9);
    auto r = run({"xen-dump-convert", "--format", "kdump", "--dump-level", "31", "--output-dir",
                  (dir / "out").string(), dir.path().string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    size_t warnings = 0;
    for (const auto& l : lines_of(r.err)) {
        if (l.find("warning:") == std::string::npos) continue;
        ++warnings;
        EXPECT_TRUE(l.find((dir / "a.core").string()) != std::string::npos ||
                    l.find((dir / "b.core").string()) != std::string::npos)
            << "a warning that names no file: " << l;
    }
    EXPECT_GE(warnings, 2u) << "each input's level is limited (no kernel to classify by):\n" << r.err;
}

TEST(Batch, OutputOptions) {
    TempDir dir;
    make_legacy(dir / "a.core", gen::Variant::pv_page_list, 8, 300, 6);
    make_xl(dir / "b.core", false, 300, 7);
    auto r = run({"xen-dump-convert", "-o", (dir / "named.out").string(), (dir / "a.core").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(verifies(dir / "named.out"));
    auto r2 = run({"xen-dump-convert", "--output-dir", (dir / "out").string(), (dir / "a.core").string(),
                   (dir / "b.core").string()});
    EXPECT_EQ(r2.exit_code, 0) << r2.err;
    EXPECT_TRUE(verifies(dir / "out/a.core"));
    EXPECT_TRUE(verifies(dir / "out/b.core"));
}

// Issue 32.7: -o FILE asks for FILE; an input named with it that cannot be
// converted (no Xen dump, already v1, already compact) is a failure naming
// the input and why, and nothing is written. A directory still skips them.
TEST(Batch, NamedOutputOfAFileThatCannotBeConvertedFails) {
    TempDir dir;
    const std::string body = "Old dumps of the web servers, 2009.\n";
    gen::write_bytes(dir / "notes.txt", std::vector<std::byte>(reinterpret_cast<const std::byte*>(body.data()),
                                                                reinterpret_cast<const std::byte*>(body.data() + body.size())));
    make_legacy(dir / "a.core", gen::Variant::pv_page_list, 8, 200, 9);
    ASSERT_EQ(run({"xen-dump-convert", "-q", "-o", (dir / "a.v1").string(), (dir / "a.core").string()}).exit_code, 0);
    ASSERT_EQ(run({"xen-dump-convert", "-q", "--format", "kdump", "-o", (dir / "a.kdump").string(),
                   (dir / "a.core").string()})
                  .exit_code,
              0);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"notes.txt", "not a Xen dump"}, {"a.v1", "already current (v1)"}, {"a.kdump", "already compact (kdump)"}};
    for (const auto& [name, why] : cases) {
        SCOPED_TRACE(name);
        const fs::path out = dir / "out.core";
        for (const bool dry_run : {false, true}) {
            std::vector<std::string> argv = {"xen-dump-convert", "-o", out.string(), (dir / name).string()};
            if (dry_run) argv.insert(argv.begin() + 1, "--dry-run");
            auto r = run(argv);
            EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
            EXPECT_NE(r.err.find((dir / name).string() + ": cannot be converted: " + why), std::string::npos) << r.err;
            EXPECT_NE(r.err.find("nothing written to " + out.string()), std::string::npos) << r.err;
            EXPECT_EQ(r.out.find("nothing to convert"), std::string::npos) << r.out;
            EXPECT_FALSE(fs::exists(out));
        }
        auto j = run({"xen-dump-convert", "--json", "-o", out.string(), (dir / name).string()});
        EXPECT_EQ(j.exit_code, 1);
        EXPECT_EQ(by_path(json_of(j))[(dir / name).string()]["result"], "failed");
    }
    // In a directory (and named without -o) they are skipped, with the reason, exit 0.
    fs::create_directory(dir / "batch");
    fs::copy_file(dir / "notes.txt", dir / "batch/notes.txt");
    auto batch = run({"xen-dump-convert", "--json", (dir / "batch").string()});
    EXPECT_EQ(batch.exit_code, 0) << batch.err;
    EXPECT_EQ(by_path(json_of(batch))[(dir / "batch/notes.txt").string()]["result"], "skipped");
    auto plain = run({"xen-dump-convert", "-q", (dir / "notes.txt").string()});
    EXPECT_EQ(plain.exit_code, 0) << plain.err;
}

std::string file_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// --threads: an output's bytes do not depend on the number of threads (the
// conversion's TIME= is the source's mtime: outputs of one source compare).
TEST(Batch, ThreadsOneAndTwoWriteTheSameBytes) {
    TempDir dir;
    make_xl(dir / "hvm.core", true, 6000, 11);
    make_legacy(dir / "pv.core", gen::Variant::pv_page_list, 8, 5000, 12);
    for (const char* src : {"hvm.core", "pv.core"}) {
        SCOPED_TRACE(src);
        const std::string base = fs::path(src).stem().string();
        auto r1 = run({"xen-dump-convert", "-q", "--threads", "1", "-o", (dir / (base + ".1")).string(), (dir / src).string()});
        auto r2 = run({"xen-dump-convert", "-q", "--threads=2", "-o", (dir / (base + ".2")).string(), (dir / src).string()});
        ASSERT_EQ(r1.exit_code, 0) << r1.err;
        ASSERT_EQ(r2.exit_code, 0) << r2.err;
        const std::string one = file_bytes(dir / (base + ".1"));
        EXPECT_GT(one.size(), 5000u * 4096);
        EXPECT_TRUE(one == file_bytes(dir / (base + ".2"))) << "--threads 1 and --threads 2 wrote different files";
        EXPECT_TRUE(verifies(dir / (base + ".2")));
    }
}

TEST(Batch, BadThreadsIsAOneLineUsageError) {
    TempDir dir;
    make_legacy(dir / "a.core", gen::Variant::pv_page_list, 8, 200, 8);
    for (const std::string bad : {"0", "65", "many", "3x"}) {
        auto r = run({"xen-dump-convert", "--threads", bad, (dir / "a.core").string()});
        EXPECT_EQ(r.exit_code, 2) << bad;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_NE(r.err.find("--threads wants a number from 1 to 64, not '" + bad + "'"), std::string::npos) << r.err;
        EXPECT_EQ(files_under(dir.path()).size(), 1u) << bad;
    }
}

// Encrypted inputs (issue 33): a legacy xc_core, an xl dump-core and a v1
// file encrypted by the age tool. Without a key: exit 3, one line, nothing
// written. With -i and no -r: refused (no plaintext on a disk) unless
// --decrypt. With -i and --decrypt or -r: the output holds what the plain
// input's output holds (the same vmcore through xen-dumpctl dump), an
// encrypted one only as an age file; the default name leaves ".age" out. An
// identity file others may read is refused as by xen-dumpctl.
TEST(Batch, EncryptedInputsConvertFromTheirPlaintextWithAKey) {
    if (run({"sh", "-c", "command -v age && command -v age-keygen"}).exit_code != 0) GTEST_SKIP() << "needs age";
    TempDir dir;
    const fs::path key = dir / "key.txt";
    ASSERT_EQ(run({"age-keygen", "-o", key.string()}).exit_code, 0);
    const std::string recipient = run({"age-keygen", "-y", key.string()}).out.substr(0, 62);
    make_legacy(dir / "legacy.core", gen::Variant::pv_page_list, 8, 300, 5);
    make_xl(dir / "xl.core", true, 300, 6);
    ASSERT_EQ(run({"xen-dump-convert", "-q", "-o", (dir / "v1.core").string(), (dir / "xl.core").string()}).exit_code, 0);
    const std::string ctl = build_program("xen-dumpctl").string();
    auto vmcore_sha = [&](const fs::path& dump, const std::string& identity = {}) {
        const RunResult r = run({"sh", "-c", "\"$0\" dump $2 -o - \"$1\" | sha256sum", ctl, dump.string(),
                                 identity.empty() ? "" : "-i " + identity});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.out;
    };
    struct Case {
        std::string name;
        std::vector<std::string> format;
    };
    for (const Case& c : {Case{"legacy", {}}, Case{"xl", {}}, Case{"v1", {"--format", "kdump"}}}) {
        SCOPED_TRACE(c.name);
        const fs::path plain = dir / (c.name + ".core"), sealed = dir / ("sealed-" + c.name + ".core.age");
        ASSERT_EQ(run({"age", "-r", recipient, "-o", sealed.string(), plain.string()}).exit_code, 0);
        auto convert = [&](std::vector<std::string> args, const fs::path& in) {
            std::vector<std::string> argv = {"xen-dump-convert", "-q"};
            argv.insert(argv.end(), c.format.begin(), c.format.end());
            argv.insert(argv.end(), args.begin(), args.end());
            argv.push_back(in.string());
            return run(argv);
        };
        const fs::path want = dir / (c.name + ".want"), out = dir / (c.name + ".out"), out_age = dir / (c.name + ".out.age");
        ASSERT_EQ(convert({"-o", want.string()}, plain).exit_code, 0);
        // No key: exit 3, one line saying so, nothing written.
        RunResult r = convert({"-o", out.string()}, sealed);
        EXPECT_EQ(r.exit_code, 3) << r.err;
        EXPECT_NE(r.err.find("need a key"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("-i FILE"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(out));
        // A key but no recipients: refused unless --decrypt.
        r = convert({"-i", key.string(), "-o", out.string()}, sealed);
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_NE(r.err.find("--decrypt"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(out));
        r = convert({"-i", key.string(), "--decrypt", "-o", out.string()}, sealed);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_TRUE(verifies(out));
        EXPECT_EQ(vmcore_sha(out), vmcore_sha(want));
        // Encrypted again: an age file of the same output; the key through $XEN_DUMP_IDENTITY.
        std::vector<std::string> again = {"xen-dump-convert", "-q"};
        again.insert(again.end(), c.format.begin(), c.format.end());
        again.insert(again.end(), {"-r", recipient, "-o", out_age.string(), sealed.string()});
        r = run(again, {"XEN_DUMP_IDENTITY=" + key.string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(slurp_text(out_age).substr(0, 22), "age-encryption.org/v1\n");
        EXPECT_EQ(vmcore_sha(out_age, key.string()), vmcore_sha(want));
    }
    // The default name beside an encrypted input leaves its ".age" out.
    RunResult r = run({"xen-dump-convert", "-q", "-i", key.string(), "--decrypt", (dir / "sealed-legacy.core.age").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(dir / "sealed-legacy.v1.core"));
    // An identity file others may read: refused, unless allowed.
    ::chmod(key.c_str(), 0644);
    r = run({"xen-dump-convert", "-q", "-i", key.string(), "--decrypt", "-o", (dir / "x").string(),
             (dir / "sealed-xl.core.age").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--allow-insecure-identity"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "x"));
    r = run({"xen-dump-convert", "-q", "-i", key.string(), "--allow-insecure-identity", "--decrypt", "-o",
             (dir / "x").string(), (dir / "sealed-xl.core.age").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // --decrypt with -r contradicts itself.
    EXPECT_EQ(run({"xen-dump-convert", "--decrypt", "-r", recipient, (dir / "xl.core").string()}).exit_code, 2);
}

TEST(Batch, UsageErrorsExitTwo) {
    TempDir dir;
    make_legacy(dir / "a.core", gen::Variant::pv_page_list, 8, 200, 8);
    EXPECT_EQ(run({"xen-dump-convert"}).exit_code, 2);
    EXPECT_EQ(run({"xen-dump-convert", "-j", "zero", (dir / "a.core").string()}).exit_code, 2);
    EXPECT_EQ(run({"xen-dump-convert", "--bogus", (dir / "a.core").string()}).exit_code, 2);
    EXPECT_EQ(run({"xen-dump-convert", "-o", "x", (dir / "a.core").string(), (dir / "a.core").string() + "2"}).exit_code,
              2);
    auto help = run({"xen-dump-convert", "--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("--allow-inferred-layout"), std::string::npos);
    auto version = run({"xen-dump-convert", "--version"});
    EXPECT_EQ(version.exit_code, 0);
    EXPECT_NE(version.out.find("xen-dump-convert "), std::string::npos);
}

}  // namespace
}  // namespace xendump::test
