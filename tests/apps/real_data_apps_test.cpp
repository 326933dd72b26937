// The programs on real material: photographs reported beside the synthetic set, the digit sheet,
// and one line naming the package when Debian's opencv-doc is absent (IGB_OPENCV_SAMPLES pointed
// at an empty folder stands for a machine without it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/apps/run_support.h"
#include "tests/support.h"

namespace {

namespace fs = std::filesystem;
using igb::test::run_app;

bool have_samples() {
  const char* env = std::getenv("IGB_OPENCV_SAMPLES");
  const fs::path dir =
      env != nullptr && *env != '\0' ? fs::path(env) : fs::path(igb::test::kOpencvSamplesDir);
  return fs::is_regular_file(dir / "baboon.jpg") && fs::is_regular_file(dir / "digits.png");
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(std::ifstream(p)); }

class RealDataApps : public ::testing::Test {
 protected:
  igb::test::TempDir tmp_;
  fs::path dir_ = tmp_.path();
};

TEST_F(RealDataApps, MissingPackageIsOneLineNamingIt) {
  const fs::path empty = dir_ / "no-samples";
  fs::create_directories(empty);
  const igb::test::RealOpencvSamples none(empty.string());
  const std::string out = " --out " + (dir_ / "run").string();
  for (const std::string& args :
       {"igb-train --optform=sr" + out, "igb-train --optform=sr --data photos" + out,
        "igb-train --optform=deblur --data photos" + out,
        "igb-train --optform=classify --data digits" + out,
        "igb-train --optform=sr --data synthetic --also-eval photos" + out}) {
    const auto r = run_app(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    ASSERT_EQ(r.lines().size(), 1u) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("install Debian's opencv-doc package"), std::string::npos)
        << args << "\n"
        << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "run")) << args;
  }
  const auto list = run_app("igb-tools list datasets");
  EXPECT_EQ(list.code, 0) << list.output;
  const size_t line = list.output.find("sr/photos");
  ASSERT_NE(line, std::string::npos) << list.output;
  const std::string photos = list.output.substr(line, list.output.find('\n', line) - line);
  EXPECT_NE(photos.find("unavailable"), std::string::npos) << photos;
}

TEST_F(RealDataApps, SrReportsPhotographsBesideSyntheticImages) {
  const igb::test::RealOpencvSamples samples;
  if (!have_samples()) GTEST_SKIP() << "real data absent: install Debian's opencv-doc package";
  const fs::path run_dir = dir_ / "run";
  const auto r = run_app(
      "igb-train --optform=sr --data synthetic --threads 1 --epochs 1 --max-batches 2 "
      "--batch-size 4 --model-arg d=8 --model-arg s=4 --model-arg m=1 --out " +
      run_dir.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("best checkpoint (epoch 0) on photos (10 images)"), std::string::npos)
      << r.output;
  const auto s = read_json(run_dir / "summary.json");
  for (const char* k : {"photos_psnr", "photos_ssim", "photos_bicubic_psnr", "photos_bicubic_ssim",
                        "synthetic_psnr", "synthetic_bicubic_psnr"})
    EXPECT_TRUE(s.contains(k)) << k << "\n" << s.dump(2);
  // Bicubic ×3 on the ten held-out photographs, Y, border 3: a property of the photographs and
  // the degradation alone (data.md).
  EXPECT_NEAR(s["photos_bicubic_psnr"].get<double>(), 28.186, 0.01);
  EXPECT_NEAR(s["photos_bicubic_ssim"].get<double>(), 0.8268, 0.001);
  EXPECT_EQ(s["synthetic_psnr"], s["best_psnr"]);

  // igb-test scores the run's own data by default and the photographs beside it on request.
  const auto t =
      run_app("igb-test --optform=sr --threads 1 --checkpoint " + (run_dir / "best.ckpt").string() +
              " --also-eval photos --out " + (dir_ / "test").string());
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("\nPhotos (--data photos)"), std::string::npos) << t.output;
  const auto ts = read_json(dir_ / "test" / "test_summary.json");
  EXPECT_EQ(ts["tested_on"], "synthetic") << ts.dump(2);
  EXPECT_NEAR(ts["photos_psnr"].get<double>(), s["photos_psnr"].get<double>(), 1e-6);
  EXPECT_EQ(ts["photos_per_image"].size(), 10u);

  // A patch larger than a training photograph is named with the photograph, before training.
  const auto big = run_app("igb-train --optform=sr --data photos --patch-size 600 --out " +
                           (dir_ / "big").string());
  EXPECT_EQ(big.code, 2) << big.output;
  EXPECT_EQ(big.lines().size(), 1u) << big.output;
  EXPECT_NE(big.output.find("training image aero1.jpg (640x480) is smaller than the 600-pixel"),
            std::string::npos)
      << big.output;
}

TEST_F(RealDataApps, DigitsTrainOnTheFixedSplitAndTestOnTheTestDigits) {
  const igb::test::RealOpencvSamples samples;
  if (!have_samples()) GTEST_SKIP() << "real data absent: install Debian's opencv-doc package";
  const fs::path run_dir = dir_ / "run";
  const auto r = run_app(
      "igb-train --optform=classify --data digits --model simplenet_mnist --threads 1 --epochs 3 "
      "--out " +
      run_dir.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("3500 training, 500 validation digits of 20x20"), std::string::npos)
      << r.output;
  const auto t = run_app("igb-test --optform=classify --threads 1 --checkpoint " +
                         (run_dir / "best.ckpt").string() + " --out " + (dir_ / "test").string());
  ASSERT_EQ(t.code, 0) << t.output;
  const auto ts = read_json(dir_ / "test" / "test_summary.json");
  EXPECT_EQ(ts["images"], 1000) << ts.dump(2);
  // Three epochs learn the digits (95.0% here); labels out of order would leave chance (10%).
  EXPECT_GT(ts["top1"].get<double>(), 85.0) << ts.dump(2);
}

}  // namespace
