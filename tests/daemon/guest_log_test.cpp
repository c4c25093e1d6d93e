// The panic line the service's records keep (bounded_panic_line): a guest's
// line of any length costs the sidecar, the journal and the crash signature
// at most kPanicLineBytes, and the cut never splits an escape or a UTF-8
// character (the kept text unescapes to a prefix of the guest's).
#include <gtest/gtest.h>

#include <string>

#include "guest_log.hpp"
#include "xendump/text.hpp"

namespace xendump::daemon {
namespace {

TEST(PanicLine, ALineThatFitsIsKept) {
    const std::string line = "[    7.793874] Kernel panic - not syncing: sysrq triggered crash";
    EXPECT_EQ(bounded_panic_line(line), line);
    const std::string exact(kPanicLineBytes, 'A');
    EXPECT_EQ(bounded_panic_line(exact), exact);
}

TEST(PanicLine, ALongLineIsCutAndMarked) {
    const std::string line(65536, 'A');
    const std::string kept = bounded_panic_line(line);
    EXPECT_EQ(kept, std::string(kPanicLineBytes, 'A') + " [" + std::to_string(65536 - kPanicLineBytes) + " more bytes]");
}

// The guest's text escaped as dmesg prints it, at every alignment of the cut.
TEST(PanicLine, TheCutSplitsNoEscapeNorCharacter) {
    for (const std::string& unit : {std::string("\x1b"), std::string("\\"), std::string("\n"), std::string("\xc3\xa9"),
                                   std::string("\xe2\x82\xac"), std::string("\xf0\x9f\x90\xa7")}) {
        for (size_t lead = 0; lead < 4; ++lead) {
            std::string guest(lead, 'A');
            while (guest.size() < 4 * kPanicLineBytes) guest += unit;
            const std::string escaped = escape_text(guest);
            const std::string kept = bounded_panic_line(escaped);
            const size_t mark = kept.rfind(" [");
            ASSERT_NE(mark, std::string::npos);
            ASSERT_LE(mark, kPanicLineBytes);
            EXPECT_GT(mark + 4, kPanicLineBytes) << "cut more than one escape short";
            const std::string prefix = kept.substr(0, mark);
            EXPECT_EQ(kept.substr(mark), " [" + std::to_string(escaped.size() - mark) + " more bytes]");
            EXPECT_EQ(escaped.compare(0, mark, prefix), 0);
            // Whole units: it unescapes to a prefix of the guest's text made of them.
            const std::string back = unescape_text(prefix);
            EXPECT_EQ(guest.compare(0, back.size(), back), 0);
            EXPECT_EQ((back.size() - lead) % unit.size(), 0u) << escape_text(unit) << " lead " << lead;
            EXPECT_TRUE(is_utf8(prefix));
        }
    }
}

}  // namespace
}  // namespace xendump::daemon
