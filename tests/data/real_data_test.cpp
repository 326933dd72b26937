// The readers of real material: OpenCV's digit sheet, the photographs' split and the video frame
// source, on small files the tests write in the real formats and on Debian's opencv-doc files
// (skipped, saying so, where the package is absent).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <opencv2/videoio.hpp>
#include <set>

#include "core/error.h"
#include "data/classify_data.h"
#include "data/datasets.h"
#include "data/dead_leaves.h"
#include "data/deblur_data.h"
#include "data/image.h"
#include "data/opencv_samples.h"
#include "data/patch_plan.h"
#include "data/sr_data.h"
#include "data/video.h"
#include "tests/support.h"

namespace igb::data {

namespace fs = std::filesystem;
using test::input_error_of;
using test::TempDir;

namespace {

/// Points the test at opencv-doc's samples for the rest of its scope, or skips it, saying so,
/// where `file` is not there.
#define SKIP_WITHOUT_OPENCV_SAMPLES(file)                                    \
  const test::RealOpencvSamples real_samples_in_scope;                       \
  if (const std::string why = opencv_sample_unavailable(file); !why.empty()) \
  GTEST_SKIP() << "real data absent: " << why

/// A digit sheet of `cols` digits a row and `rows_per_digit` rows a digit, in which the digit at
/// row r, column c has every pixel 10 * (r / rows_per_digit) + c + 1 (its label and column).
at::Tensor digit_sheet(int64_t cols, int64_t rows_per_digit) {
  const int64_t rows = 10 * rows_per_digit;
  auto sheet = torch::zeros({3, rows * kDigitSide, cols * kDigitSide});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      sheet.narrow(1, r * kDigitSide, kDigitSide)
          .narrow(2, c * kDigitSide, kDigitSide)
          .fill_(static_cast<double>(10 * (r / rows_per_digit) + c + 1) / 255.0);
  return sheet;
}

}  // namespace

TEST(DigitSheet, DigitsComeInReadingOrderWithTheirBandsLabel) {
  TempDir tmp;
  write_image(tmp / "digits.png", digit_sheet(/*cols=*/3, /*rows_per_digit=*/2));
  const auto d = read_digit_sheet(tmp / "digits.png");
  ASSERT_EQ(d.images.sizes(), (at::IntArrayRef{60, 1, 20, 20}));
  ASSERT_EQ(d.labels.size(0), 60);
  for (int64_t i = 0; i < 60; ++i) {
    const int64_t label = i / 6, column = i % 3;
    EXPECT_EQ(d.labels[i].item<int64_t>(), label) << "digit " << i;
    EXPECT_EQ(d.images[i].min().item<int64_t>(), 10 * label + column + 1) << "digit " << i;
    EXPECT_EQ(d.images[i].max().item<int64_t>(), 10 * label + column + 1) << "digit " << i;
  }
}

TEST(DigitSheet, ASheetThatIsNotOfDigitsIsRefusedInOneLine) {
  TempDir tmp;
  write_image(tmp / "odd.png", torch::zeros({3, 200, 30}));
  const auto message = input_error_of([&] { read_digit_sheet(tmp / "odd.png"); });
  EXPECT_NE(message.find("odd.png is 30x200"), std::string::npos) << message;
  EXPECT_NE(message.find("2000x1000"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  // Rows of digits that do not split into ten bands.
  write_image(tmp / "bands.png", torch::zeros({3, 180, 40}));
  EXPECT_NE(input_error_of([&] { read_digit_sheet(tmp / "bands.png"); }).find("ten"),
            std::string::npos);
}

TEST(DigitSheet, TheFixedSplitGivesSevenThreeTenthsToTrainingAndKeepsTestApart) {
  int counts[3] = {0, 0, 0};
  for (int64_t i = 0; i < 500; ++i) ++counts[static_cast<int>(digit_split(i))];
  EXPECT_EQ(counts[0], 350);
  EXPECT_EQ(counts[1], 50);
  EXPECT_EQ(counts[2], 100);
  EXPECT_EQ(digit_split(6), DigitSplit::kTrain);
  EXPECT_EQ(digit_split(7), DigitSplit::kValidation);
  EXPECT_EQ(digit_split(18), DigitSplit::kTest);
}

TEST(DigitSheet, DataDigitsReadsTheSheetOfTheSamplesFolder) {
  TempDir tmp;
  write_image(tmp / "digits.png", digit_sheet(/*cols=*/10, /*rows_per_digit=*/1));
  const test::RealOpencvSamples samples(tmp.path().string());
  ClassifyDataOptions o;
  o.input_shape = {1, 1, 28, 28};
  const auto validation = load_classify_data("digits", o);
  EXPECT_EQ(validation.dataset, "digits");
  EXPECT_EQ(validation.train->size(), 70);
  EXPECT_EQ(validation.val->size(), 10);  // position 7 of each digit's ten
  o.test_split = true;
  const auto test = load_classify_data("digits", o);
  EXPECT_EQ(test.val->size(), 20);  // positions 8 and 9
  std::set<int64_t> labels;
  for (int64_t i = 0; i < test.val->size(); ++i)
    labels.insert(test.val->get(i, 0).target.item<int64_t>());
  EXPECT_EQ(labels.size(), 10u);
  EXPECT_EQ(test.val->get(0, 0).input.sizes(), (at::IntArrayRef{1, 28, 28}));
}

TEST(DigitSheet, OpenCvsSheetHoldsFiveHundredOfEachDigit) {
  SKIP_WITHOUT_OPENCV_SAMPLES("digits.png");
  const auto d = read_digit_sheet(opencv_sample("digits.png", "test"));
  ASSERT_EQ(d.images.sizes(), (at::IntArrayRef{5000, 1, 20, 20}));
  EXPECT_TRUE(d.labels.bincount().eq(500).all().item<bool>());
  // Handwriting: dark background, bright strokes, every digit drawn.
  EXPECT_LT(d.images.to(torch::kFloat).mean().item<double>(), 60.0);
  EXPECT_TRUE(d.images.flatten(1).amax(1).gt(128).all().item<bool>());
}

TEST(OpencvSamples, AMissingPackageIsOneLineNamingIt) {
  TempDir tmp;
  const test::RealOpencvSamples samples(tmp.path().string());
  const std::string why = photos_unavailable();
  EXPECT_NE(why.find("opencv-doc"), std::string::npos) << why;
  EXPECT_NE(why.find("apt-get install opencv-doc"), std::string::npos) << why;
  EXPECT_EQ(dataset_unavailable("sr", "photos"), why);
  EXPECT_EQ(dataset_unavailable("sr", "synthetic"), "");
  SrDataOptions sr;
  for (const auto& message :
       {input_error_of([&] { load_sr_data("photos", sr); }),
        input_error_of([&] { load_deblur_data("photos", DeblurDataOptions()); }),
        input_error_of([&] { load_classify_data("digits", ClassifyDataOptions()); })}) {
    EXPECT_NE(message.find("opencv-doc"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(OpencvSamples, TheHeldOutPhotographsAreNeverTrainedOn) {
  const auto& train = training_photos();
  const auto& held = held_out_photos();
  EXPECT_EQ(train.size(), 20u);
  EXPECT_EQ(held.size(), 10u);
  for (const auto& name : held)
    EXPECT_EQ(std::find(train.begin(), train.end(), name), train.end()) << name;
  // Pictures of one scene stay on one side of the split.
  for (const auto& [a, b] :
       std::vector<std::pair<std::string, std::string>>{{"aloeL.jpg", "aloeR.jpg"},
                                                        {"leuvenA.jpg", "leuvenB.jpg"},
                                                        {"left.jpg", "right.jpg"},
                                                        {"rubberwhale1.png", "rubberwhale2.png"},
                                                        {"ela_original.jpg", "ela_modified.jpg"}})
    EXPECT_EQ(std::count(train.begin(), train.end(), a), std::count(train.begin(), train.end(), b))
        << a << " and " << b;
}

TEST(OpencvSamples, PhotosAreRealPicturesOfTheExpectedSizes) {
  SKIP_WITHOUT_OPENCV_SAMPLES("baboon.jpg");
  ASSERT_EQ(photos_unavailable(), "");
  const auto held = read_photos(held_out_photos(), "test", kDefaultMaxImagePixels);
  ASSERT_EQ(held.size(), 10u);
  EXPECT_EQ(held[0].sizes(), (at::IntArrayRef{3, 512, 512}));  // baboon
  for (const auto& img : held) {
    EXPECT_GE(std::min(img.size(1), img.size(2)), 194);
    // Real photographs: colour and detail everywhere, not flat fills.
    EXPECT_GT(img.std().item<double>(), 0.08);
  }
  SrDataOptions o;
  const auto eval = load_sr_eval_data("photos", o);
  ASSERT_EQ(eval.size(), 10u);
  EXPECT_EQ(eval[0].name, "baboon.jpg");
  EXPECT_EQ(eval[0].lr.sizes(), (at::IntArrayRef{1, 170, 170}));  // 510 / 3, Y
}

TEST(PatchPlan, EqualCountsInterleaveAndPerImageCountsAreBlocks) {
  const PatchPlan equal(3, 2);
  EXPECT_EQ(equal.size(), 6);
  EXPECT_EQ(equal.image(0), 0u);
  EXPECT_EQ(equal.image(4), 1u);
  const PatchPlan blocks(3, 2, {1, 3, 2});
  EXPECT_EQ(blocks.size(), 6);
  const std::vector<size_t> expected = {0, 1, 1, 1, 2, 2};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(blocks.image(i), expected[i]) << i;
  const auto counts = patches_by_area(
      {torch::zeros({3, 144, 144}), torch::zeros({3, 288, 144}), torch::zeros({3, 10, 10})}, 8,
      144);
  EXPECT_EQ(counts, (std::vector<int64_t>{8, 16, 1}));
  EXPECT_EQ(share_by_area({torch::zeros({3, 100, 100}), torch::zeros({3, 300, 100})}, 800),
            (std::vector<int64_t>{200, 600}));
}

TEST(DeadLeaves, ImagesAreSeededOccludingShapesAtEveryScale) {
  const auto a = render_dead_leaves(96, 128, 7);
  EXPECT_EQ(a.sizes(), (at::IntArrayRef{3, 96, 128}));
  EXPECT_TRUE(torch::equal(a, render_dead_leaves(96, 128, 7)));
  EXPECT_FALSE(torch::equal(a, render_dead_leaves(96, 128, 8)));
  EXPECT_GE(a.min().item<double>(), 0.0);
  EXPECT_LE(a.max().item<double>(), 1.0);
  // Flat leaves with sharp borders: many neighbouring pixels nearly equal, some far apart.
  const auto dx = (a.narrow(2, 1, 127) - a.narrow(2, 0, 127)).abs().mean(0);
  EXPECT_GT(dx.lt(0.03).to(torch::kFloat).mean().item<double>(), 0.3);
  EXPECT_GT(dx.gt(0.2).to(torch::kFloat).mean().item<double>(), 0.01);
}

namespace {

/// Writes `count` frames of 64x48 as Motion-JPEG in an AVI at `fps`; frame i is a flat grey of
/// level 40 * i + 20.
void write_video(const fs::path& path, int count, double fps) {
  cv::VideoWriter writer(path.string(), cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), fps,
                         cv::Size(64, 48));
  ASSERT_TRUE(writer.isOpened());
  for (int i = 0; i < count; ++i)
    writer.write(cv::Mat(48, 64, CV_8UC3, cv::Scalar::all(40 * i + 20)));
}

}  // namespace

TEST(VideoFrames, FramesComeInOrderWithTheirIndexAndTime) {
  TempDir tmp;
  write_video(tmp / "clip.avi", 5, 10.0);
  VideoFrames video(tmp / "clip.avi");
  EXPECT_EQ(video.width(), 64);
  EXPECT_EQ(video.height(), 48);
  EXPECT_DOUBLE_EQ(video.fps(), 10.0);
  EXPECT_EQ(video.frame_count(), 5);
  VideoFrame f;
  int64_t n = 0;
  while (video.next(f)) {
    EXPECT_EQ(f.index, n);
    EXPECT_NEAR(f.seconds, 0.1 * static_cast<double>(n), 1e-6);
    ASSERT_EQ(f.rgb.sizes(), (at::IntArrayRef{3, 48, 64}));
    // Motion-JPEG is lossy: the grey level within a couple of steps.
    EXPECT_NEAR(f.rgb.mean().item<double>() * 255, 40.0 * static_cast<double>(n) + 20, 2.5);
    ++n;
  }
  EXPECT_EQ(n, 5);
  EXPECT_FALSE(video.next(f));
}

TEST(VideoFrames, AStrideAndACapKeepEveryNthFrameUpToTheCap) {
  TempDir tmp;
  write_video(tmp / "clip.avi", 5, 25.0);
  VideoOptions o;
  o.stride = 2;
  VideoFrames every_other(tmp / "clip.avi", o);
  VideoFrame f;
  std::vector<int64_t> kept;
  while (every_other.next(f)) {
    kept.push_back(f.index);
    EXPECT_NEAR(f.seconds, static_cast<double>(f.index) / 25.0, 1e-6);
  }
  EXPECT_EQ(kept, (std::vector<int64_t>{0, 2, 4}));
  o.max_frames = 2;
  VideoFrames capped(tmp / "clip.avi", o);
  kept.clear();
  while (capped.next(f)) kept.push_back(f.index);
  EXPECT_EQ(kept, (std::vector<int64_t>{0, 2}));
}

TEST(VideoFrames, FilesThatAreNotVideosAreRefusedInOneLine) {
  TempDir tmp;
  EXPECT_NE(input_error_of([&] { VideoFrames v(tmp / "none.avi"); }).find("does not exist"),
            std::string::npos);
  std::ofstream(tmp / "text.avi") << "not a video at all\n";
  const auto message = input_error_of([&] { VideoFrames v(tmp / "text.avi"); });
  EXPECT_NE(message.find("text.avi"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  write_video(tmp / "big.avi", 2, 10.0);
  VideoOptions o;
  o.max_pixels = 1000;
  EXPECT_NE(input_error_of([&] { VideoFrames v(tmp / "big.avi", o); }).find("64x48"),
            std::string::npos);
}

TEST(VideoFrames, OpenCvsStreetSceneDecodes) {
  SKIP_WITHOUT_OPENCV_SAMPLES("vtest.avi");
  VideoOptions o;
  o.max_frames = 3;
  VideoFrames video(opencv_sample("vtest.avi", "test"), o);
  EXPECT_EQ(video.width(), 768);
  EXPECT_EQ(video.height(), 576);
  EXPECT_GT(video.frame_count(), 100);
  VideoFrame f, first;
  ASSERT_TRUE(video.next(first));
  ASSERT_TRUE(video.next(f));
  // A street scene: textured frames, consecutive ones alike but not equal.
  EXPECT_GT(first.rgb.std().item<double>(), 0.05);
  const double change = (f.rgb - first.rgb).abs().mean().item<double>();
  EXPECT_GT(change, 0.0);
  EXPECT_LT(change, 0.05);
  EXPECT_GT(f.seconds, first.seconds);
}

}  // namespace igb::data
