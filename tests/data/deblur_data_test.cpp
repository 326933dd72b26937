#include "data/deblur_data.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "core/error.h"
#include "data/datasets.h"
#include "data/image.h"
#include "data/motion_blur.h"
#include "tests/support.h"

namespace igb::data {

namespace {

namespace fs = std::filesystem;

/// Writes `image` as PNG at `path`, making its folder.
void deblur_write(const fs::path& path, const at::Tensor& image) {
  fs::create_directories(path.parent_path());
  write_image(path, image);
}

/// An 8-bit image of size h x w drawn after `seed`.
at::Tensor deblur_image(int64_t h, int64_t w, uint64_t seed) {
  torch::manual_seed(seed);
  return quantize_8bit(torch::rand({3, h, w}));
}

}  // namespace

TEST(MotionBlur, KernelsAreNonNegativeAndSumToOne) {
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const auto k = random_motion_kernel(seed);
    ASSERT_EQ(k.sizes(), (std::vector<int64_t>{21, 21}));
    EXPECT_GE(k.min().item<float>(), 0.0f) << seed;
    EXPECT_NEAR(k.sum().item<double>(), 1.0, 1e-5) << seed;
    EXPECT_GT(k.max().item<float>(), 0.0f);
  }
  for (double length : {1.0, 5.0, 12.5, 21.0}) {
    const auto k = shake_motion_kernel(21, length, 7);
    EXPECT_NEAR(k.sum().item<double>(), 1.0, 1e-5) << length;
  }
  // The same seed draws the same kernel, another seed another one.
  EXPECT_TRUE(torch::equal(random_motion_kernel(3), random_motion_kernel(3)));
  EXPECT_FALSE(torch::equal(shake_motion_kernel(21, 15, 1), shake_motion_kernel(21, 15, 2)));
}

TEST(MotionBlur, AHorizontalLineLiesOnTheCentreRowWithItsLength) {
  const auto k = linear_motion_kernel(15, 9, 0);
  EXPECT_NEAR(k[7].sum().item<double>(), 1.0, 1e-6);  // all of it on row 7
  // Nine pixels long: columns 3..11, nothing beyond.
  EXPECT_GT(k[7][3].item<float>(), 0.0f);
  EXPECT_GT(k[7][11].item<float>(), 0.0f);
  EXPECT_EQ(k[7][2].item<float>(), 0.0f);
  EXPECT_EQ(k[7][12].item<float>(), 0.0f);
  // Vertical at 90 degrees: the transpose.
  EXPECT_TRUE(torch::allclose(linear_motion_kernel(15, 9, 90), k.t(), 0, 1e-6));
}

// A true convolution: an impulse comes out as the kernel itself (not flipped), a constant image
// stays constant (reflect padding, kernel summing to 1).
TEST(MotionBlur, BlurIsAConvolutionThatKeepsConstants) {
  const auto k = shake_motion_kernel(9, 7, 5);
  auto impulse = torch::zeros({1, 31, 31});
  impulse[0][15][15] = 1;
  const auto out = blur_image(impulse, k);
  EXPECT_TRUE(torch::allclose(out[0].narrow(0, 11, 9).narrow(1, 11, 9), k, 0, 1e-6));
  const auto flat = torch::full({3, 24, 30}, 0.4);
  EXPECT_TRUE(torch::allclose(blur_image(flat, k), flat, 0, 1e-6));
  const auto sharp = deblur_image(40, 40, 1);
  const auto a = synthetic_motion_blur(sharp, 9), b = synthetic_motion_blur(sharp, 9);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_GT((a - sharp).abs().mean().item<double>(), 0.01);
  EXPECT_TRUE(torch::equal(a, quantize_8bit(a)));  // rounded to 8 bits
}

// The blur convolves the kernel's non-zero square only; the image is the one the whole kernel
// gives (here against LibTorch's conv2d with the full 21×21 kernel, reflect-padded by 10).
TEST(MotionBlur, ConvolvingTheSupportEqualsTheWholeKernel) {
  const auto line = linear_motion_kernel(21, 5, 0);
  EXPECT_EQ(support_of(line).sizes(), torch::IntArrayRef({5, 5}));
  EXPECT_DOUBLE_EQ(support_of(line).sum().item<double>(), 1.0);
  auto dot = torch::zeros({21, 21});
  dot[10][10] = 1;
  EXPECT_EQ(support_of(dot).sizes(), torch::IntArrayRef({1, 1}));
  const auto sharp = deblur_image(40, 36, 3);
  for (uint64_t seed : {1, 2, 3}) {
    MotionBlurOptions o;
    o.linear_share = 0.5;
    const auto k = random_motion_kernel(seed, o);
    ASSERT_EQ(k.size(0), 21);
    EXPECT_LT(support_of(k).size(0), 21);
    auto padded = torch::nn::functional::pad(
        sharp.unsqueeze(0),
        torch::nn::functional::PadFuncOptions({10, 10, 10, 10}).mode(torch::kReflect));
    const auto ref =
        torch::conv2d(padded,
                      k.flip({0, 1}).view({1, 1, 21, 21}).expand({3, 1, 21, 21}).contiguous(),
                      at::Tensor(), at::IntArrayRef{1}, at::IntArrayRef{0}, at::IntArrayRef{1}, 3)
            .squeeze(0);
    EXPECT_TRUE(torch::allclose(blur_image(sharp, k), ref, 0, 1e-6)) << seed;
  }
}

TEST(DeblurData, SyntheticPairsAndAlignedCrops) {
  DeblurDataOptions o;
  o.synthetic_train_images = 3;
  o.synthetic_val_images = 2;
  o.synthetic_size = 64;
  o.patch_size = 32;
  auto d = load_deblur_data("synthetic", o);
  EXPECT_EQ(d.train->size(), 3 * o.patches_per_image);
  ASSERT_EQ(d.val.size(), 2u);
  EXPECT_EQ(d.val[0].sharp.sizes(), (std::vector<int64_t>{3, 64, 64}));
  EXPECT_FALSE(torch::equal(d.val[0].sharp, d.val[0].blurred));
  const auto ex = d.train->get(1, 0);
  EXPECT_EQ(ex.input.sizes(), (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(ex.target.sizes(), (std::vector<int64_t>{3, 32, 32}));
  EXPECT_TRUE(torch::equal(d.train->get(1, 0).input, ex.input));  // deterministic
  const auto eval = load_deblur_eval_data("synthetic", o);
  ASSERT_EQ(eval.size(), 2u);
  EXPECT_TRUE(torch::equal(eval[1].blurred, d.val[1].blurred));
}

// With a fresh blur each training crop is the sharp crop under a kernel of its own: the same
// (index, epoch) gives the same input, another epoch another blur; kernels sum to 1, so a flat
// image stays flat, and blur lowers the image's gradient energy.
TEST(DeblurData, FreshBlurDrawsAKernelPerCropAndEpoch) {
  DeblurDataOptions o;
  o.patch_size = 32;
  o.patches_per_image = 2;
  o.blur.max_noise = 0;
  DeblurPair textured{"t.png", deblur_image(64, 64, 7), deblur_image(64, 64, 7)};
  DeblurPair flat{"f.png", torch::full({3, 64, 64}, 0.4f), torch::full({3, 64, 64}, 0.4f)};
  DeblurTrainSet fresh({textured, flat}, o, /*reblur=*/true);
  DeblurTrainSet fixed({textured, flat}, o, /*reblur=*/false);
  const auto grad_energy = [](const at::Tensor& x) {
    return (x.narrow(2, 1, x.size(2) - 1) - x.narrow(2, 0, x.size(2) - 1))
        .abs()
        .sum()
        .item<double>();
  };
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto a = fresh.get(0, epoch);
    EXPECT_TRUE(torch::equal(a.input, fresh.get(0, epoch).input));
    EXPECT_FALSE(torch::equal(a.input, a.target));
    EXPECT_LT(grad_energy(a.input), 0.8 * grad_energy(a.target));
    // The fixed set's "blurred" image is the sharp one here: it crops it unchanged.
    const auto b = fixed.get(0, epoch);
    EXPECT_TRUE(torch::equal(b.input, b.target));
    const auto f = fresh.get(1, epoch);
    EXPECT_LT((f.input - 0.4).abs().max().item<double>(), 0.5 / 255 + 1e-6);
  }
  EXPECT_FALSE(torch::equal(fresh.get(0, 0).input, fresh.get(0, 1).input));
}

// Crops and flips are the same for both images of a pair: with blurred = sharp / 2 built in, every
// training example keeps input = target / 2.
TEST(DeblurData, GoProFolderIsRecognisedAndCropsStayAligned) {
  test::TempDir tmp;
  const fs::path root = tmp.path() / "GOPRO";
  for (const char* split : {"train", "test"})
    for (int s = 0; s < 2; ++s)
      for (int i = 0; i < 2; ++i) {
        const auto sharp =
            deblur_image(40, 48, static_cast<uint64_t>(s * 10 + i + (split[1] == 'e' ? 100 : 0)));
        const std::string seq = std::string("GOPR000") + std::to_string(s);
        const std::string file = "00000" + std::to_string(i) + ".png";
        deblur_write(root / split / seq / "sharp" / file, sharp);
        deblur_write(root / split / seq / "blur" / file, quantize_8bit(sharp * 0.5));
      }
  EXPECT_TRUE(is_gopro_folder(root));
  EXPECT_EQ(recognise_dataset("deblur", root.string()), "gopro");
  DeblurDataOptions o;
  o.patch_size = 24;
  auto d = load_deblur_data(root.string(), o);
  EXPECT_NE(d.description.find("GoPro: 4 training, 4 test pairs"), std::string::npos)
      << d.description;
  ASSERT_EQ(d.val.size(), 4u);
  EXPECT_EQ(d.val[0].name, "GOPR0000/000000.png");
  for (int64_t i = 0; i < d.train->size(); ++i) {
    const auto ex = d.train->get(i, 3);
    EXPECT_TRUE(torch::allclose(ex.input, quantize_8bit(ex.target * 0.5), 0, 1e-6)) << i;
  }
  // A blurred image without its sharp partner, and a pair of two sizes, name the file.
  fs::remove(root / "train" / "GOPR0001" / "sharp" / "000001.png");
  try {
    load_deblur_data(root.string(), o);
    ADD_FAILURE() << "loaded a pair without its partner";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("000001.png: no sharp partner"), std::string::npos)
        << e.what();
  }
  deblur_write(root / "train" / "GOPR0001" / "sharp" / "000001.png", deblur_image(40, 40, 1));
  try {
    load_deblur_data(root.string(), o);
    ADD_FAILURE() << "loaded a pair of two sizes";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is 48x40 but its sharp partner"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(load_deblur_data((tmp.path() / "nothing").string(), o), InputError);
}

TEST(DeblurData, TwoFoldersHoldOutEveryTenthPair) {
  test::TempDir tmp;
  for (int i = 0; i < 12; ++i) {
    const auto sharp = deblur_image(32, 32, static_cast<uint64_t>(i));
    const std::string file = "img" + std::to_string(10 + i) + ".png";
    deblur_write(tmp.path() / "b" / file, quantize_8bit(sharp * 0.5));
    deblur_write(tmp.path() / "s" / file, sharp);
  }
  DeblurDataOptions o;
  o.patch_size = 16;
  o.blur_dir = (tmp.path() / "b").string();
  o.sharp_dir = (tmp.path() / "s").string();
  auto d = load_deblur_data("", o);
  EXPECT_EQ(d.train->size(), 11 * o.patches_per_image);
  ASSERT_EQ(d.val.size(), 1u);
  EXPECT_EQ(d.val[0].name, "img19.png");
  EXPECT_EQ(load_deblur_eval_data("", o)[0].name, "img19.png");
  o.sharp_dir.clear();
  EXPECT_THROW(load_deblur_data("", o), InputError);
  o.sharp_dir = (tmp.path() / "s").string();
  o.patch_size = 64;
  EXPECT_THROW(load_deblur_data("", o), InputError);  // pairs smaller than a crop
}

}  // namespace igb::data
