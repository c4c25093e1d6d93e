// Guest names that are hostile to file names, logs and terminals, dumped into
// a dump directory of a simulated host through run_dump_job (what the service
// and the one-shot command do): every dump is visible to `list` and to the
// storage limits, survives the start-up cleanup, has a safe and distinct file
// name, and keeps the name byte for byte in its sidecar and its note.
#include <gtest/gtest.h>

#include <algorithm>

#include "dump_dir.hpp"
#include "dump_job.hpp"
#include "journal_log.hpp"
#include "service_harness.hpp"
#include "test_support.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/reader.hpp"
#include "xendump/text.hpp"

using namespace xendump::daemon;
using xendump::test::TempDir;

namespace {

const std::vector<std::string> kHostileNames = {
    ".hidden",                 // a hidden file, out of sight of list and MaxUse
    ".xendump-tmp.web",        // looks like a writer's temporary
    ".xendump-room.web",       // looks like the room held for a sidecar
    "a%2Fb",                   // what "a/b" (refused by the simulator) encodes to
    "evil\n\x1b[31mred",       // a forged line and an escape sequence
    "a b",                     // these two must not share a file name
    "a_b",
    "-rf",                     // an option to whoever types `rm *`
};

}  // namespace

TEST(DumpNames, HostileGuestNamesGetSafeDistinctVisibleDumps) {
    TempDir tmp;
    std::vector<xendump::test::SimDomainSpec> domains;
    for (size_t i = 0; i < kHostileNames.size(); ++i)
        domains.push_back({static_cast<uint32_t>(i + 1), kHostileNames[i],
                           "00000000-0000-4000-8000-00000000000" + std::to_string(i + 1), 64});
    auto host_dir = tmp / "host";
    xendump::test::create_sim_host(host_dir, domains);
    auto hv = xendump::open_hypervisor("sim:" + host_dir.string());

    Config config = Config::defaults();
    config.dump_dir = tmp / "dumps";
    config.keep_free.reset();
    log_set_enabled(false);
    for (size_t i = 0; i < kHostileNames.size(); ++i) {
        DumpRequest req;
        req.domid = static_cast<uint32_t>(i + 1);
        auto r = run_dump_job(*hv, config, req);
        ASSERT_EQ(r.result, DumpOutcome::ok) << kHostileNames[i] << ": " << r.error;
        std::string name = r.path.filename().string();
        EXPECT_EQ(r.path.parent_path(), config.dump_dir) << name;
        EXPECT_FALSE(name.starts_with(".")) << name;
        EXPECT_FALSE(name.starts_with("-")) << name;
        EXPECT_EQ(name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+-.%"),
                  std::string::npos)
            << name;
        // The name as it is: in the sidecar, and (escaped reversibly) in the note.
        EXPECT_EQ(read_sidecar(r.sidecar).domain_name, kHostileNames[i]);
        auto reader = xendump::DumpReader::open(r.path);
        auto noted = reader.domain().get(xendump::keys::kName);
        ASSERT_TRUE(noted) << name;
        EXPECT_EQ(xendump::unescape_text(*noted), kHostileNames[i]);
        EXPECT_EQ(noted->find_first_of("\n\x1b"), std::string::npos);
    }

    // The start-up cleanup removes nothing of them ...
    EXPECT_TRUE(clean_temporaries(config.dump_dir).empty());
    // ... and every one is listed and counted by the storage limits.
    auto entries = scan_dump_dir(config.dump_dir);
    ASSERT_EQ(entries.size(), kHostileNames.size());
    for (const auto& e : entries) EXPECT_TRUE(std::filesystem::exists(e.dump)) << e.dump;
    config.max_use = SizeLimit{1, 0, false};  // one byte: everything must go
    EXPECT_EQ(vacuum_dump_dir(config).size(), kHostileNames.size());
    EXPECT_TRUE(scan_dump_dir(config.dump_dir).empty());
    EXPECT_TRUE(std::filesystem::is_empty(config.dump_dir));
}

TEST(LogText, ControlCharactersInMessagesAreEscapedFieldsKeptExact) {
    const std::string name = "evil\n\x1b[31mred\\";
    auto line = stderr_line(LogLevel::notice, "dump of " + name + " written");
    EXPECT_EQ(line, "xen-dumpd: dump of evil\\n\\x1b[31mred\\\\ written\n");
    auto items = journal_items(LogLevel::notice, "dump of " + name, {{"DOMAIN", name}}, nullptr);
    EXPECT_EQ(items.at(0), "MESSAGE=dump of evil\\n\\x1b[31mred\\\\");
    EXPECT_NE(std::find(items.begin(), items.end(), "DOMAIN=" + name), items.end());
}

TEST(LogText, EscapeIsReversibleAndLeavesNoControlCharacter) {
    const std::vector<std::string> texts = {
        "web01", "évé ☃", "a\nb\r\t", std::string("nul\0in", 6), "\x1b[2J\x7f", "\xc2\x9b" "1m",  // C1 CSI
        "\xff\xfe not utf-8 \xe2\x82", "back\\slash \\x41", "\xed\xa0\x80"};              // a surrogate
    for (const auto& t : texts) {
        std::string e = xendump::escape_text(t);
        EXPECT_EQ(xendump::unescape_text(e), t) << e;
        for (unsigned char c : e) EXPECT_TRUE((c >= 0x20 || c == '\t') && c != 0x7f) << e;
        EXPECT_EQ(e.find("\xc2\x9b"), std::string::npos) << e;
    }
    EXPECT_EQ(xendump::escape_text("évé ☃"), "évé ☃");  // UTF-8 text stays readable
    EXPECT_EQ(xendump::unescape_text("C:\\dir"), "C:\\dir");  // an older writer's backslash
}

// Issue 32 item 3: the one rule escapes every C0 control but tab (\r, \v,
// \f, ESC), DEL, C1, invalid UTF-8, and the code points that reorder or
// break what a terminal shows: the bidi controls U+200E/F, U+202A-U+202E,
// U+2066-U+2069 and the separators U+2028/U+2029; its inverse gives the bytes back.
TEST(LogText, EscapeCoversEveryControlThatRedrawsOrReordersALine) {
    EXPECT_EQ(xendump::escape_text("a\tb"), "a\tb");  // tab stays
    EXPECT_EQ(xendump::escape_text("\r\v\f\x1b\x7f"), "\\r\\x0b\\x0c\\x1b\\x7f");
    const std::vector<std::pair<std::string, std::string>> layout = {
        {"\u200e", "\\xe2\\x80\\x8e"}, {"\u200f", "\\xe2\\x80\\x8f"}, {"\u2028", "\\xe2\\x80\\xa8"},
        {"\u2029", "\\xe2\\x80\\xa9"}, {"\u202a", "\\xe2\\x80\\xaa"}, {"\u202b", "\\xe2\\x80\\xab"},
        {"\u202c", "\\xe2\\x80\\xac"}, {"\u202d", "\\xe2\\x80\\xad"}, {"\u202e", "\\xe2\\x80\\xae"},
        {"\u2066", "\\xe2\\x81\\xa6"}, {"\u2067", "\\xe2\\x81\\xa7"}, {"\u2068", "\\xe2\\x81\\xa8"},
        {"\u2069", "\\xe2\\x81\\xa9"}};
    for (const auto& [raw, escaped] : layout) {
        EXPECT_EQ(xendump::escape_text("x" + raw + "y"), "x" + escaped + "y") << escaped;
        EXPECT_EQ(xendump::unescape_text(escaped), raw);
    }
    // Their neighbours are text: U+200D (joiner), U+2027, U+202F, U+2065, U+206A stay.
    for (const char* kept : {"\u200d", "\u2027", "\u202f", "\u2065", "\u206a"})
        EXPECT_EQ(xendump::escape_text(kept), kept);
}
