#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image.h"

namespace igb::data {

/// Images with labels held in memory: uint8 [N, C, H, W] and int64 [N].
struct LabeledImages {
  at::Tensor images;
  at::Tensor labels;
};

/// Reads CIFAR-10 binary batch files (records of 1 label byte + 3072 pixel bytes, R, G, B planes
/// of 32×32). Throws InputError naming the file on a truncated file or a label outside 0–9.
LabeledImages read_cifar10_batches(const std::vector<std::filesystem::path>& files);

/// Writes `images` (uint8 [N, 3, 32, 32], labels 0–9) as one CIFAR-10 binary batch file, the
/// format read_cifar10_batches reads, atomically. InputError for another shape or label range.
void write_cifar10_batch(const std::filesystem::path& file, const LabeledImages& images);

/// `count` images of the seeded synthetic shapes (uint8 [count, 3, size, size]), class i % 10,
/// image i drawn from seed + i: the images `--data synthetic` trains on (seeds 10,000,000 for
/// training, 20,000,000 for validation).
LabeledImages synthetic_shape_images(int64_t count, int64_t size, uint64_t seed);

/// Reads an MNIST IDX pair (images magic 2051, labels magic 2049, big-endian sizes). Throws
/// InputError naming the file on a bad magic, truncated data, count mismatch or label > 9.
LabeledImages read_mnist(const std::filesystem::path& images, const std::filesystem::path& labels);

/// The side of one digit of OpenCV's digit sheet, in pixels.
inline constexpr int64_t kDigitSide = 20;

/// Reads OpenCV's handwritten-digit sheet (samples/data/digits.png): a grey image tiled with
/// 20×20 digits, row by row, in ten equal bands of rows, band k holding digit k (OpenCV's is
/// 2000×1000: 100 digits a row, 5 rows a digit, 500 of each). Returns the digits in reading
/// order, uint8 [N, 1, 20, 20], and their labels. InputError naming the file when its sides are
/// not multiples of 20 or its rows of digits do not split into ten bands.
LabeledImages read_digit_sheet(const std::filesystem::path& path,
                               int64_t max_pixels = kDefaultMaxImagePixels);

/// Which of the digit sheet's fixed splits a digit belongs to: within each digit's band, in
/// reading order, positions 0–6 of every ten train, 7 validates and 8–9 test (OpenCV's sheet:
/// 3,500 training, 500 validation, 1,000 test digits, each a tenth per class).
enum class DigitSplit { kTrain, kValidation, kTest };
DigitSplit digit_split(int64_t position_in_band);

/// How classification examples are made.
struct ClassifyDataOptions {
  /// The largest image read, in pixels (width × height); larger ones are refused from their
  /// header (--max-image-pixels). Default kDefaultMaxImagePixels.
  int64_t max_image_pixels = kDefaultMaxImagePixels;
  /// "auto" (recognise `--data`) or a classify dataset of the registry: "cifar10", "imagefolder",
  /// "mnist", "synthetic" (`igb-tools list datasets`). Default "auto".
  std::string dataset = "auto";
  /// The model's input shape {1, C, H, W}: examples are converted to C channels and H×W.
  std::vector<int64_t> input_shape = {1, 3, 32, 32};
  /// Training augmentation (small inputs: pad 4 + random crop + flip; large: random crop + flip).
  bool augment = true;
  /// Seed of the augmentation's crops and flips. Default 0.
  uint64_t seed = 0;
  /// Evaluate on the dataset's test split instead of its validation split, where it keeps the
  /// two apart (digits); the other datasets validate on their test split anyway. Default false.
  bool test_split = false;
  /// Synthetic shapes only: training images. Default 20000.
  int64_t synthetic_train = 20000;
  /// Synthetic shapes only: validation images. Default 2000.
  int64_t synthetic_val = 2000;
};

/// Training and validation sets of one classification run.
struct ClassifyData {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> val;
  std::vector<std::string> classes;
  /// "cifar10", "mnist", "imagefolder", "synthetic".
  std::string dataset;
  std::string description;
};

/// Which dataset `data` is ("synthetic", or a folder holding CIFAR-10 binaries, MNIST IDX files
/// or class sub-folders), asking the registry's classify entries in their recognition order;
/// InputError when it is none of them.
std::string detect_classify_dataset(const std::string& data);

/// Loads `data` for classification with the registry entry `options.dataset` (or the one that
/// recognises `data`). An unknown dataset is an InputError listing the valid ones.
ClassifyData load_classify_data(const std::string& data, const ClassifyDataOptions& options);

}  // namespace igb::data
