#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image.h"
#include "data/patch_plan.h"

namespace igb::data {

/// How super-resolution examples are made.
struct SrDataOptions {
  /// The largest image read, in pixels (width × height); larger ones are refused from their
  /// header (--max-image-pixels). Default kDefaultMaxImagePixels.
  int64_t max_image_pixels = kDefaultMaxImagePixels;
  /// Upscaling factor (2, 3 or 4).
  int64_t scale = 3;
  /// Side of the high-resolution training patch in pixels; a multiple of `scale`.
  int64_t patch_size = 96;
  /// Train and evaluate on the luma channel only (true) or on RGB.
  bool y_channel = true;
  /// Random flips and 90° rotations of training patches.
  bool augment = true;
  /// Random patches drawn from each training image per epoch.
  int64_t patches_per_image = 8;
  /// Random crops a training patch is chosen from, the one with the most detail (the mean
  /// absolute difference of neighbouring pixels) kept: photographs spend much of their area on
  /// flat sky and walls that teach an SR network little. 1: every crop is kept.
  int64_t patch_candidates = 1;
  /// Seed of crops and flips.
  uint64_t seed = 0;
  /// Synthetic data only: training images. Default 200.
  int64_t synthetic_train_images = 200;
  /// Synthetic data only: validation images. Default 10.
  int64_t synthetic_val_images = 10;
  /// Synthetic data only: side of every image in pixels. Default 144.
  int64_t synthetic_size = 144;
};

/// Low resolution by MATLAB-style bicubic downscaling, rounded to 8 bits as a saved image would be.
at::Tensor degrade_bicubic(const at::Tensor& hr_rgb, int64_t scale);

/// Crops H and W down to multiples of `scale` (MATLAB's modcrop).
at::Tensor modcrop(const at::Tensor& image, int64_t scale);

/// Training set: random HR patches of the training images with their bicubic LR versions.
class SrTrainSet : public Dataset {
 public:
  /// `patches[i]` random patches are drawn from image i each epoch (patches_by_area); empty
  /// gives every image `options.patches_per_image`.
  SrTrainSet(std::vector<at::Tensor> images, SrDataOptions options,
             std::vector<int64_t> patches = {});
  int64_t size() const override;
  /// input: LR [C, p/s, p/s]; target: HR [C, p, p]; C = 1 (Y) or 3 (RGB).
  Example get(int64_t index, int64_t epoch) const override;

 private:
  std::vector<at::Tensor> images_;
  SrDataOptions options_;
  PatchPlan plan_;
};

/// One validation image, prepared once.
struct SrEvalImage {
  std::string name;
  /// Model input (Y or RGB), [C, h, w].
  at::Tensor lr;
  /// Ground truth, RGB [3, H, W].
  at::Tensor hr_rgb;
  /// Bicubic upscaling of the LR image, RGB [3, H, W].
  at::Tensor bicubic_rgb;
};

/// Training and validation data of one SR run.
struct SrData {
  std::unique_ptr<SrTrainSet> train;
  std::vector<SrEvalImage> val;
  /// Where the data came from ("synthetic", or "<folder> (<layout>)").
  std::string description;
};

/// Prepares validation images (modcrop, degradation, bicubic baseline).
std::vector<SrEvalImage> make_sr_eval_images(const std::vector<at::Tensor>& hr_rgb,
                                             const std::vector<std::string>& names,
                                             const SrDataOptions& options);

/// Loads `data` ("synthetic" or an image folder) for SR with the dataset registry's "sr" entry that
/// recognises it. Bad folders, unreadable images and images smaller than a training patch are
/// InputErrors naming the file.
SrData load_sr_data(const std::string& data, const SrDataOptions& options);

/// Only the validation images of `data` (for testing a checkpoint).
std::vector<SrEvalImage> load_sr_eval_data(const std::string& data, const SrDataOptions& options);

}  // namespace igb::data
