#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image.h"
#include "data/motion_blur.h"
#include "data/patch_plan.h"

namespace igb::data {

/// How deblurring examples are made.
struct DeblurDataOptions {
  /// The largest image read, in pixels (width × height); larger ones are refused from their
  /// header (--max-image-pixels). Default kDefaultMaxImagePixels.
  int64_t max_image_pixels = kDefaultMaxImagePixels;
  /// Side of the training crops in pixels.
  int64_t patch_size = 128;
  /// Random aligned flips and transposes of training crops.
  bool augment = true;
  /// Random crops drawn from each training pair per epoch.
  int64_t patches_per_image = 4;
  /// Seed of crops and flips.
  uint64_t seed = 0;
  /// Two folders of pairs with the same file names (--blur-dir, --sharp-dir); when both are set
  /// they are the data, whatever `--data` says. Every tenth pair by name (at least one) is held
  /// out for validation.
  std::string blur_dir, sharp_dir;
  /// Synthetic data only: pairs, image side, and the blur drawn.
  int64_t synthetic_train_images = 200;
  int64_t synthetic_val_images = 10;
  int64_t synthetic_size = 144;
  MotionBlurOptions blur;
  /// Synthetic data only: every training crop is blurred anew from its sharp image (a kernel and
  /// noise of its own, different each epoch) instead of cropped from one fixed blurred image, so
  /// the generator never sees the same blur twice. Validation pairs stay fixed.
  bool fresh_blur = true;
};

/// One aligned pair: blurred input and sharp target, RGB [3, H, W] in [0, 1].
struct DeblurPair {
  std::string name;
  at::Tensor blurred, sharp;
};

/// Training set: aligned random crops (and, with augment, the same flips and transposes) of the
/// training pairs; input blurred, target sharp. With `reblur`, the input is instead the sharp
/// crop blurred by a fresh random kernel (`options.blur`), drawn per crop and epoch: the window
/// around the crop is blurred and its centre kept, so crop borders see real image content.
class DeblurTrainSet : public Dataset {
 public:
  /// `patches[i]` crops are drawn from pair i each epoch (patches_by_area); empty gives every
  /// pair `options.patches_per_image`.
  DeblurTrainSet(std::vector<DeblurPair> pairs, DeblurDataOptions options, bool reblur = false,
                 const std::vector<int64_t>& patches = {});
  int64_t size() const override;
  Example get(int64_t index, int64_t epoch) const override;

 private:
  std::vector<DeblurPair> pairs_;
  DeblurDataOptions options_;
  bool reblur_;
  PatchPlan plan_;
};

/// Training and validation data of one deblurring run.
struct DeblurData {
  std::unique_ptr<DeblurTrainSet> train;
  std::vector<DeblurPair> val;
  /// Where the data came from.
  std::string description;
};

/// Loads `data` ("synthetic", a GoPro folder) or the --blur-dir/--sharp-dir pairs with the
/// dataset registry's "deblur" entry that recognises it. A missing partner file, pairs of
/// different sizes and images smaller than a training crop are InputErrors naming the file.
DeblurData load_deblur_data(const std::string& data, const DeblurDataOptions& options);

/// Only the validation pairs (testing a checkpoint): a GoPro folder's test part, the held-out
/// pairs of two folders, the synthetic validation pairs.
std::vector<DeblurPair> load_deblur_eval_data(const std::string& data,
                                              const DeblurDataOptions& options);

/// Whether `root` has the GoPro layout: train/ and test/, each with sequence folders holding
/// blur/ and sharp/.
bool is_gopro_folder(const std::filesystem::path& root);

}  // namespace igb::data
