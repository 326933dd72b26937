#include "core/registry.h"

#include <gtest/gtest.h>

#include <functional>

namespace igb {

TEST(Registry, UnknownNameListsValidNames) {
  Registry<std::function<int()>> r("widget");
  r.add("alpha", [] { return 1; });
  r.add("beta", [] { return 2; });
  EXPECT_EQ(r.get("beta")(), 2);
  try {
    r.get("gamma");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "unknown widget 'gamma'; valid widgets: alpha, beta");
  }
}

TEST(Registry, DuplicateAndFrozenAreRejected) {
  Registry<int> r("thing");
  r.add("a", 1);
  EXPECT_THROW(r.add("a", 2), std::logic_error);
  r.freeze();
  EXPECT_THROW(r.add("b", 3), std::logic_error);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"a"}));
}

TEST(ClosestNames, RanksByEditDistance) {
  auto c = closest_names("mid_part.1.wieght",
                         {"first_part.0.weight", "mid_part.1.weight", "mid_part.3.weight"}, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], "mid_part.1.weight");
  EXPECT_EQ(c[1], "mid_part.3.weight");
}

}  // namespace igb
