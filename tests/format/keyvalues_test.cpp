#include <gtest/gtest.h>

#include "xendump/error.hpp"
#include "xendump/keyvalues.hpp"

using xendump::KeyValues;

TEST(KeyValues, SerializeKeepsOrderAndReplaces) {
    KeyValues kv;
    kv.set("DOMID", "7");
    kv.set("NAME", "web01");
    kv.set("DOMID", "8");
    EXPECT_EQ(kv.serialize(), "DOMID=8\nNAME=web01\n");
}

TEST(KeyValues, ParseSkipsJunkAndTrailingNuls) {
    std::string text("A=1\nnot a pair\n=x\nB=two=2\n\0\0\0", 30);
    auto kv = KeyValues::parse(text);
    ASSERT_EQ(kv.items().size(), 2u);
    EXPECT_EQ(kv.get("A"), "1");
    EXPECT_EQ(kv.get("B"), "two=2");
    EXPECT_FALSE(kv.get("C"));
}

TEST(KeyValues, RefusesNewlineInValue) {
    KeyValues kv;
    EXPECT_THROW(kv.set("NAME", "a\nb"), xendump::Error);
    EXPECT_THROW(kv.set("A=B", "x"), xendump::Error);
}
