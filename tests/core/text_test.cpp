#include "core/text.h"

#include <gtest/gtest.h>

namespace igb {

TEST(FirstLine, StopsAtTheFirstNewline) {
  EXPECT_EQ(first_line("shape mismatch [2x3]\nException raised from ...\nframe #0"),
            "shape mismatch [2x3]");
  EXPECT_EQ(first_line("one line"), "one line");
  EXPECT_EQ(first_line("\nafter"), "");
  EXPECT_EQ(first_line(""), "");
}

}  // namespace igb
