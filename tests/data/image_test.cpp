#include "data/image.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tests/support.h"

namespace igb::data {

namespace fs = std::filesystem;

TEST(RgbToY, MatlabRgb2ycbcrValues) {
  // [3, 1, 5]: black, white, red, green, blue.
  auto rgb = torch::tensor({0.f, 1.f, 1.f, 0.f, 0.f,  //
                            0.f, 1.f, 0.f, 1.f, 0.f,  //
                            0.f, 1.f, 0.f, 0.f, 1.f})
                 .reshape({3, 1, 5});
  auto y = rgb_to_y(rgb) * 255;
  ASSERT_EQ(y.sizes(), torch::IntArrayRef({1, 1, 5}));
  EXPECT_NEAR(y[0][0][0].item<float>(), 16.0, 1e-4);
  EXPECT_NEAR(y[0][0][1].item<float>(), 235.0, 1e-3);
  EXPECT_NEAR(y[0][0][2].item<float>(), 81.481, 1e-3);
  EXPECT_NEAR(y[0][0][3].item<float>(), 144.553, 1e-3);
  EXPECT_NEAR(y[0][0][4].item<float>(), 40.966, 1e-3);
}

TEST(RgbToY, WorksOnBatches) {
  auto rgb = torch::rand({2, 3, 4, 4}, torch::TensorOptions().dtype(torch::kFloat32));
  auto y = rgb_to_y(rgb);
  EXPECT_EQ(y.sizes(), torch::IntArrayRef({2, 1, 4, 4}));
  EXPECT_TRUE(torch::allclose(y[1], rgb_to_y(rgb[1])));
}

TEST(YCbCr, InverseRoundTrips) {
  torch::manual_seed(1);
  auto rgb = torch::rand({3, 5, 7});
  EXPECT_TRUE(torch::allclose(ycbcr_to_rgb(rgb_to_ycbcr(rgb)), rgb, 1e-4, 1e-4));
  // Grey has neutral chroma (128).
  auto grey = torch::full({3, 1, 1}, 0.5f);
  auto ycc = rgb_to_ycbcr(grey) * 255;
  EXPECT_NEAR(ycc[1][0][0].item<float>(), 128.0, 1e-3);
  EXPECT_NEAR(ycc[2][0][0].item<float>(), 128.0, 1e-3);
}

TEST(ImageIo, PngRoundTripIsExactOn8BitValues) {
  torch::manual_seed(2);
  auto img = torch::randint(0, 256, {3, 6, 9}).to(torch::kFloat32) / 255;
  test::TempDir tmp;
  auto path = tmp / "igb_image_io_test.png";
  write_image(path, img);
  auto back = read_image(path);
  EXPECT_TRUE(torch::allclose(back, img, 0, 1e-6));
}

TEST(ImageIo, CorruptAndMissingFilesNameTheFile) {
  test::TempDir tmp;
  auto path = tmp / "igb_corrupt_image_test.png";
  std::ofstream(path) << "\x89PNG this is not a png";
  try {
    read_image(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos);
  }
  fs::remove(path);
  EXPECT_THROW(read_image(path), InputError);
}

}  // namespace igb::data
