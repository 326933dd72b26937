#include "data/image_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/image.h"
#include "data/sr_data.h"
#include "tests/support.h"

namespace igb::data {

namespace fs = std::filesystem;

class ImageFolderTest : public ::testing::Test {
 protected:
  void image(const fs::path& rel, int64_t h = 40, int64_t w = 40, float v = 0.5f) {
    fs::create_directories((root_ / rel).parent_path());
    write_image(root_ / rel, torch::full({3, h, w}, v));
  }
  test::TempDir tmp_;
  fs::path root_ = tmp_.path();
};

TEST_F(ImageFolderTest, RecognisesBsds300) {
  image("images/train/1.jpg");
  image("images/train/sub/2.png");
  image("images/test/3.bmp");
  std::ofstream(root_ / "images/train/readme.txt") << "not an image";
  auto s = split_image_folder(root_);
  EXPECT_EQ(s.layout, "bsds300");
  EXPECT_EQ(s.train.size(), 2u);
  ASSERT_EQ(s.val.size(), 1u);
  EXPECT_EQ(s.val[0].filename(), "3.bmp");
}

TEST_F(ImageFolderTest, RecognisesTrainVal) {
  image("train/a.png");
  image("valid/b.png");
  auto s = split_image_folder(root_);
  EXPECT_EQ(s.layout, "train/val");
  EXPECT_EQ(s.train.size(), 1u);
  EXPECT_EQ(s.val.size(), 1u);
}

TEST_F(ImageFolderTest, FlatHoldsOutEveryTenth) {
  for (int i = 0; i < 20; ++i) image("img" + std::to_string(100 + i) + ".png", 8, 8);
  auto s = split_image_folder(root_);
  EXPECT_EQ(s.layout, "flat");
  EXPECT_EQ(s.train.size(), 18u);
  ASSERT_EQ(s.val.size(), 2u);
  EXPECT_EQ(s.val[0].filename(), "img109.png");
  // For evaluation alone, a flat folder is a whole test set.
  EXPECT_EQ(split_image_folder_or_all(root_).val.size(), 20u);
}

TEST_F(ImageFolderTest, EmptyAndMissingFoldersAreErrors) {
  try {
    split_image_folder(root_);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no images"), std::string::npos);
  }
  EXPECT_THROW(split_image_folder(root_ / "nope"), InputError);
}

// A link to an image that is gone is named, not skipped: the folder would train on less than it
// seems to hold.
TEST_F(ImageFolderTest, ABrokenLinkIsNamedNotSkipped) {
  image("train/a.png");
  image("valid/b.png");
  fs::create_symlink(root_ / "gone.png", root_ / "train" / "c.png");
  try {
    split_image_folder(root_);
    FAIL() << "a broken link was skipped";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "data folder entry " + (root_ / "train" / "c.png").string() +
                                         " is a broken link (to " + (root_ / "gone.png").string() +
                                         ", which does not exist)");
  }
}

TEST_F(ImageFolderTest, SrDataRejectsCorruptAndTooSmallImages) {
  image("train/ok.png", 100, 100);
  image("val/v.png", 48, 48);
  SrDataOptions o;
  o.patch_size = 96;
  auto d = load_sr_data(root_.string(), o);
  EXPECT_EQ(d.train->size(), 8);
  auto ex = d.train->get(0, 0);
  EXPECT_EQ(ex.input.sizes(), torch::IntArrayRef({1, 32, 32}));
  EXPECT_EQ(ex.target.sizes(), torch::IntArrayRef({1, 96, 96}));

  image("train/small.png", 50, 120);
  try {
    load_sr_data(root_.string(), o);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("small.png"), std::string::npos) << e.what();
  }
  fs::remove(root_ / "train/small.png");
  std::ofstream(root_ / "train/broken.png") << "garbage";
  try {
    load_sr_data(root_.string(), o);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.png"), std::string::npos) << e.what();
  }
}

TEST(SrData, PatchesAreDeterministicAndDegradedByBicubic) {
  SrDataOptions o;
  o.synthetic_train_images = 3;
  o.synthetic_val_images = 2;
  o.synthetic_size = 72;
  o.patch_size = 48;
  o.scale = 4;
  o.seed = 9;
  auto d = load_sr_data("synthetic", o);
  EXPECT_EQ(d.train->size(), 24);
  auto a = d.train->get(5, 1), b = d.train->get(5, 1), c = d.train->get(5, 2);
  EXPECT_TRUE(torch::equal(a.input, b.input));
  EXPECT_FALSE(torch::equal(a.target, c.target));
  EXPECT_EQ(a.input.sizes(), torch::IntArrayRef({1, 12, 12}));
  ASSERT_EQ(d.val.size(), 2u);
  EXPECT_EQ(d.val[0].hr_rgb.sizes(), torch::IntArrayRef({3, 72, 72}));
  EXPECT_EQ(d.val[0].lr.sizes(), torch::IntArrayRef({1, 18, 18}));
  // LR values sit on the 8-bit grid of the RGB image they come from.
  auto lr_rgb = degrade_bicubic(d.val[0].hr_rgb, 4);
  EXPECT_TRUE(torch::allclose(lr_rgb * 255, (lr_rgb * 255).round(), 0, 1e-3));
  EXPECT_EQ(modcrop(torch::zeros({3, 50, 47}), 3).sizes(), torch::IntArrayRef({3, 48, 45}));
}

}  // namespace igb::data
