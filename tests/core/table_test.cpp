#include "core/table.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support.h"

namespace igb {

TEST(Table, TextAlignsNumbersRight) {
  Table t{{"Name", "MACs"}, {{"conv1", "1200"}, {"fc", "84"}}};
  EXPECT_EQ(t.to_text(),
            " Name  | MACs\n"
            "-------+------\n"
            " conv1 | 1200\n"
            " fc    |   84\n");
}

TEST(Table, CsvQuotesWhereNeeded) {
  Table t{{"a", "b"}, {{"x,y", "say \"hi\""}}};
  EXPECT_EQ(t.to_csv(), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n");
}

TEST(CsvAppender, KeepsExistingHeaderOnResume) {
  test::TempDir tmp;
  auto path = tmp / "igb_csv_appender_test.csv";
  {
    CsvAppender a(path.string(), {"epoch", "loss"});
    a.append({{"epoch", "0"}, {"loss", "1.5"}});
  }
  {
    CsvAppender b(path.string(), {"epoch", "loss", "extra"});
    b.append({{"loss", "0.5"}, {"epoch", "1"}, {"extra", "ignored"}});
  }
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "epoch,loss\n0,1.5\n1,0.5\n");
}

}  // namespace igb
