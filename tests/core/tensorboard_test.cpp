#include "core/tensorboard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tests/support.h"

namespace igb {

namespace fs = std::filesystem;

TEST(Crc32c, StandardCheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(crc32c(s, 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // RFC 3720 B.4: 32 bytes of zeros.
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
}

TEST(Crc32c, MaskedForm) {
  uint32_t crc = crc32c("123456789", 9);
  EXPECT_EQ(masked_crc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

class EventFileTest : public ::testing::Test {
 protected:
  test::TempDir tmp_;
  fs::path dir_ = tmp_.path();
};

TEST_F(EventFileTest, RecordFramingAndScalarsRoundTrip) {
  fs::path path;
  {
    EventWriter w(dir_);
    w.add_scalar("val/psnr", 31.25, 3);
    w.add_scalar("train/loss", 0.5, 4);
    w.flush();
    path = w.path();
  }
  EXPECT_NE(path.filename().string().find("tfevents"), std::string::npos);

  // The first record's framing, checked byte by byte.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 16u);
  uint64_t len;
  uint32_t len_crc, data_crc;
  std::memcpy(&len, bytes.data(), 8);
  std::memcpy(&len_crc, bytes.data() + 8, 4);
  EXPECT_EQ(len_crc, masked_crc32c(bytes.data(), 8));
  std::memcpy(&data_crc, bytes.data() + 12 + len, 4);
  EXPECT_EQ(data_crc, masked_crc32c(bytes.data() + 12, len));
  EXPECT_NE(bytes.substr(12, len).find("brain.Event:2"), std::string::npos);

  std::string version;
  auto events = read_event_file(path, &version);
  EXPECT_EQ(version, "brain.Event:2");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].tag, "val/psnr");
  EXPECT_FLOAT_EQ(events[0].value, 31.25f);
  EXPECT_EQ(events[0].step, 3);
  EXPECT_EQ(events[1].tag, "train/loss");
  EXPECT_EQ(events[1].step, 4);
}

TEST_F(EventFileTest, CorruptedPayloadIsDetected) {
  fs::path path;
  {
    EventWriter w(dir_);
    w.add_scalar("x", 1.0, 0);
    path = w.path();
  }
  // Flip every bit of one payload byte (byte 14 lies in the first record's wall time, whose
  // value changes from run to run: writing a fixed byte there would corrupt nothing 1 time in 256).
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(14);
  const char old_byte = static_cast<char>(f.get());
  f.seekp(14);
  f.put(static_cast<char>(~old_byte));
  f.close();
  EXPECT_THROW(read_event_file(path), InputError);
}

}  // namespace igb
