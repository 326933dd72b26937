#include "data/deblur_data.h"

#include <torch/torch.h>

#include <map>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"
#include "data/datasets.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "data/opencv_samples.h"
#include "data/synthetic_images.h"

namespace igb::data {

namespace fs = std::filesystem;

namespace {
constexpr uint64_t kDeblurTrainSeed = 3000;
constexpr uint64_t kDeblurValSeed = 950000;
constexpr uint64_t kDeblurPhotoTrainSeed = 4000;
constexpr uint64_t kDeblurPhotoValSeed = 960000;
}  // namespace

DeblurTrainSet::DeblurTrainSet(std::vector<DeblurPair> pairs, DeblurDataOptions options,
                               bool reblur, const std::vector<int64_t>& patches)
    : pairs_(std::move(pairs)),
      options_(options),
      reblur_(reblur),
      plan_(pairs_.size(), options_.patches_per_image, patches) {}

int64_t DeblurTrainSet::size() const { return plan_.size(); }

Example DeblurTrainSet::get(int64_t index, int64_t epoch) const {
  const auto& pair = pairs_[plan_.image(index)];
  Rng rng = Rng::from(options_.seed, static_cast<uint64_t>(epoch) * 0x10001 + 11,
                      static_cast<uint64_t>(index));
  const int64_t p = options_.patch_size;
  const int64_t y = rng.integer(0, pair.sharp.size(1) - p),
                x = rng.integer(0, pair.sharp.size(2) - p);
  auto sharp = pair.sharp.narrow(1, y, p).narrow(2, x, p);
  at::Tensor blurred;
  if (reblur_) {
    // Blur a window reaching up to the kernel's radius beyond the crop (less at image borders,
    // where blur_image reflects), then keep the crop.
    const int64_t r = options_.blur.kernel_size / 2;
    const int64_t y0 = std::max<int64_t>(0, y - r), x0 = std::max<int64_t>(0, x - r);
    const int64_t y1 = std::min<int64_t>(pair.sharp.size(1), y + p + r),
                  x1 = std::min<int64_t>(pair.sharp.size(2), x + p + r);
    const auto window = pair.sharp.narrow(1, y0, y1 - y0).narrow(2, x0, x1 - x0);
    blurred = synthetic_motion_blur(window, rng.next(), options_.blur)
                  .narrow(1, y - y0, p)
                  .narrow(2, x - x0, p);
  } else {
    blurred = pair.blurred.narrow(1, y, p).narrow(2, x, p);
  }
  if (options_.augment) {
    if (rng.coin()) blurred = blurred.flip({2}), sharp = sharp.flip({2});
    if (rng.coin()) blurred = blurred.flip({1}), sharp = sharp.flip({1});
    if (rng.coin()) blurred = blurred.transpose(1, 2), sharp = sharp.transpose(1, 2);
  }
  return {blurred.contiguous(), sharp.contiguous()};
}

namespace {

std::vector<DeblurPair> synthetic_pairs(int64_t count, uint64_t base, const DeblurDataOptions& o) {
  std::vector<DeblurPair> pairs;
  for (int64_t i = 0; i < count; ++i) {
    DeblurPair p;
    p.name = "synthetic_" + std::to_string(i) + ".png";
    const uint64_t seed = base + static_cast<uint64_t>(i);
    p.sharp = render_synthetic_image(o.synthetic_size, o.synthetic_size, seed);
    p.blurred = synthetic_motion_blur(p.sharp, seed * 2654435761ull + 17, o.blur);
    pairs.push_back(std::move(p));
  }
  return pairs;
}

void check_patch(const std::vector<DeblurPair>& pairs, const DeblurDataOptions& o) {
  for (const auto& p : pairs)
    if (p.sharp.size(1) < o.patch_size || p.sharp.size(2) < o.patch_size)
      throw InputError("training pair " + p.name + " (" + std::to_string(p.sharp.size(2)) + "x" +
                       std::to_string(p.sharp.size(1)) + ") is smaller than the " +
                       std::to_string(o.patch_size) + "-pixel crop");
}

DeblurData make_data(std::vector<DeblurPair> train, std::vector<DeblurPair> val,
                     const DeblurDataOptions& o, std::string description, bool reblur = false,
                     const std::vector<int64_t>& patches = {}) {
  check_patch(train, o);
  DeblurData d;
  d.description = std::move(description);
  d.train = std::make_unique<DeblurTrainSet>(std::move(train), o, reblur, patches);
  d.val = std::move(val);
  return d;
}

/// 5 -> "5", 0.01 -> "0.01" (six significant digits at most).
std::string format_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

DeblurData load_synthetic(const std::string&, const DeblurDataOptions& o) {
  const auto& b = o.blur;
  return make_data(synthetic_pairs(o.synthetic_train_images, kDeblurTrainSeed, o),
                   synthetic_pairs(o.synthetic_val_images, kDeblurValSeed, o), o,
                   "synthetic (" + std::to_string(o.synthetic_train_images) + " training, " +
                       std::to_string(o.synthetic_val_images) +
                       " validation pairs; motion blur of " + format_number(b.min_length) + "-" +
                       format_number(b.max_length) + " px, " + format_number(100 * b.linear_share) +
                       "% straight, noise sigma up to " + format_number(b.max_noise) +
                       (o.fresh_blur ? "; a fresh blur for every training crop" : "") + ")",
                   o.fresh_blur);
}

std::vector<DeblurPair> load_synthetic_eval(const std::string&, const DeblurDataOptions& o) {
  return synthetic_pairs(o.synthetic_val_images, kDeblurValSeed, o);
}

/// Photographs blurred as synthetic pairs are: pair i by the seed `base` + i.
std::vector<DeblurPair> photo_pairs(const std::vector<std::string>& names, uint64_t base,
                                    const DeblurDataOptions& o) {
  const auto sharp = read_photos(names, "--data photos", o.max_image_pixels);
  std::vector<DeblurPair> pairs;
  for (size_t i = 0; i < names.size(); ++i) {
    DeblurPair p;
    p.name = names[i];
    p.sharp = sharp[i];
    p.blurred = synthetic_motion_blur(p.sharp, (base + i) * 2654435761ull + 17, o.blur);
    pairs.push_back(std::move(p));
  }
  return pairs;
}

// --data photos: the training photographs, each training crop blurred anew (fresh_blur) or cut
// from one fixed blurred copy, as many crops an epoch as the synthetic set gives, shared among
// the photographs by area; validated on the held-out photographs, each blurred once by a fixed
// seed.
DeblurData load_photos(const std::string&, const DeblurDataOptions& o) {
  auto train = photo_pairs(training_photos(), kDeblurPhotoTrainSeed, o);
  std::vector<at::Tensor> sharp;
  for (const auto& p : train) sharp.push_back(p.sharp);
  // An epoch as long as the synthetic set's (200 images x 4 crops), shared out by area.
  const auto patches = share_by_area(sharp, o.patches_per_image * o.synthetic_train_images);
  const auto& b = o.blur;
  const std::string description =
      "photos (" + std::to_string(train.size()) + " training photographs, " +
      std::to_string(held_out_photos().size()) + " held out; motion blur of " +
      format_number(b.min_length) + "-" + format_number(b.max_length) + " px, " +
      format_number(100 * b.linear_share) + "% straight, noise sigma up to " +
      format_number(b.max_noise) + (o.fresh_blur ? "; a fresh blur for every training crop" : "") +
      ")";
  // Validation every epoch scores the central 256x256 of each held-out pair, a third of their
  // pixels; igb-test scores them whole (load_photos_eval).
  auto val = photo_pairs(held_out_photos(), kDeblurPhotoValSeed, o);
  for (auto& p : val) {
    const int64_t h = std::min<int64_t>(256, p.sharp.size(1)),
                  w = std::min<int64_t>(256, p.sharp.size(2));
    const int64_t y = (p.sharp.size(1) - h) / 2, x = (p.sharp.size(2) - w) / 2;
    p.sharp = p.sharp.narrow(1, y, h).narrow(2, x, w).contiguous();
    p.blurred = p.blurred.narrow(1, y, h).narrow(2, x, w).contiguous();
  }
  return make_data(std::move(train), std::move(val), o,
                   description +
                       "; validated on the "
                       "central 256x256 of each",
                   o.fresh_blur, patches);
}

std::vector<DeblurPair> load_photos_eval(const std::string&, const DeblurDataOptions& o) {
  return photo_pairs(held_out_photos(), kDeblurPhotoValSeed, o);
}

/// The pairs of `blur_dir` and `sharp_dir` by relative path; `label` names the pair in messages.
std::vector<DeblurPair> read_pairs(const fs::path& blur_dir, const fs::path& sharp_dir,
                                   int64_t max_pixels, const std::string& prefix = "") {
  std::vector<DeblurPair> pairs;
  const auto blurred = list_images(blur_dir);
  if (blurred.empty()) throw InputError(blur_dir.string() + ": no images");
  for (const auto& b : blurred) {
    const fs::path rel = fs::relative(b, blur_dir);
    const fs::path s = sharp_dir / rel;
    if (!fs::exists(s))
      throw InputError(b.string() + ": no sharp partner " + s.string() + " (pairs share names)");
    DeblurPair p;
    p.name = prefix + rel.string();
    p.blurred = read_image(b, max_pixels);
    p.sharp = read_image(s, max_pixels);
    if (p.blurred.sizes() != p.sharp.sizes())
      throw InputError(b.string() + " is " + std::to_string(p.blurred.size(2)) + "x" +
                       std::to_string(p.blurred.size(1)) + " but its sharp partner " + s.string() +
                       " is " + std::to_string(p.sharp.size(2)) + "x" +
                       std::to_string(p.sharp.size(1)));
    pairs.push_back(std::move(p));
  }
  return pairs;
}

/// Every pair of one GoPro split: <split>/<sequence>/blur/* with <sequence>/sharp/*.
std::vector<DeblurPair> read_gopro_split(const fs::path& split, int64_t max_pixels) {
  std::vector<DeblurPair> pairs;
  for (const auto& seq : list_subfolders(split)) {
    auto part = read_pairs(split / seq / "blur", split / seq / "sharp", max_pixels, seq + "/");
    for (auto& p : part) pairs.push_back(std::move(p));
  }
  if (pairs.empty()) throw InputError(split.string() + ": no sequences with blur/ and sharp/");
  return pairs;
}

DeblurData load_gopro(const std::string& data, const DeblurDataOptions& o) {
  auto train = read_gopro_split(fs::path(data) / "train", o.max_image_pixels);
  auto val = read_gopro_split(fs::path(data) / "test", o.max_image_pixels);
  const std::string desc = data + " (GoPro: " + std::to_string(train.size()) + " training, " +
                           std::to_string(val.size()) + " test pairs)";
  return make_data(std::move(train), std::move(val), o, desc);
}

std::vector<DeblurPair> load_gopro_eval(const std::string& data, const DeblurDataOptions& o) {
  return read_gopro_split(fs::path(data) / "test", o.max_image_pixels);
}

/// Two folders: every tenth pair by name (at least one) held out.
void split_pairs(std::vector<DeblurPair> all, std::vector<DeblurPair>& train,
                 std::vector<DeblurPair>& val, const std::string& where) {
  if (all.size() < 2)
    throw InputError(where + ": " + std::to_string(all.size()) +
                     " pair; at least two are needed to hold one out for validation");
  for (size_t i = 0; i < all.size(); ++i)
    (i % 10 == 9 || (all.size() < 10 && i + 1 == all.size()) ? val : train)
        .push_back(std::move(all[i]));
}

DeblurData load_two_folders(const DeblurDataOptions& o) {
  std::vector<DeblurPair> train, val;
  split_pairs(read_pairs(o.blur_dir, o.sharp_dir, o.max_image_pixels), train, val, o.blur_dir);
  const std::string desc = o.blur_dir + " + " + o.sharp_dir + " (" + std::to_string(train.size()) +
                           " training, " + std::to_string(val.size()) + " validation pairs)";
  return make_data(std::move(train), std::move(val), o, desc);
}

DatasetSpec deblur_spec(std::string selected_by, int order,
                        std::function<bool(const std::string&)> recognises,
                        DeblurDatasetFactory load, DeblurEvalFactory eval) {
  DatasetSpec s;
  s.family = "deblur";
  s.selected_by = std::move(selected_by);
  s.recognise_order = order;
  s.recognises = std::move(recognises);
  s.deblur = std::move(load);
  s.deblur_eval = std::move(eval);
  return s;
}

const DatasetSpec& deblur_dataset_for(const std::string& data) {
  const std::string name = recognise_dataset("deblur", data);
  if (name.empty())
    throw InputError("--data " + data +
                     ": not 'synthetic' and not a GoPro folder (train/ and test/ with "
                     "<sequence>/blur and <sequence>/sharp); two folders of pairs go to "
                     "--blur-dir and --sharp-dir");
  return dataset_spec("deblur", name);
}

bool two_folders(const DeblurDataOptions& o) { return !o.blur_dir.empty() || !o.sharp_dir.empty(); }

void check_two_folders(const DeblurDataOptions& o) {
  if (o.blur_dir.empty() || o.sharp_dir.empty())
    throw InputError("--blur-dir and --sharp-dir go together");
}

}  // namespace

bool is_gopro_folder(const fs::path& root) {
  std::error_code ec;
  for (const char* split : {"train", "test"}) {
    const fs::path dir = root / split;
    if (!fs::is_directory(dir, ec)) return false;
    bool any = false;
    for (const auto& seq : fs::directory_iterator(dir, ec))
      if (fs::is_directory(seq.path() / "blur", ec) && fs::is_directory(seq.path() / "sharp", ec))
        any = true;
    if (!any) return false;
  }
  return true;
}

void register_deblur_datasets(Registry<DatasetSpec>& r) {
  r.add("deblur/synthetic",
        deblur_spec(
            "--data synthetic", 0, [](const std::string& d) { return d == "synthetic"; },
            load_synthetic, load_synthetic_eval),
        "seeded synthetic sharp images blurred by random straight and camera-shake motion "
        "kernels, plus noise");
  DatasetSpec photos = deblur_spec(
      "--data photos", 0, [](const std::string& d) { return d == "photos"; }, load_photos,
      load_photos_eval);
  photos.unavailable = photos_unavailable;
  r.add("deblur/photos", photos,
        "the photographs of Debian's opencv-doc: 20 to train on, each crop blurred anew, and 10 "
        "held out (baboon, building, butterfly, ...), blurred once; data/opencv_samples.cpp "
        "lists the split");
  r.add("deblur/gopro",
        deblur_spec(
            "a folder with train/ and test/, each <sequence>/blur/ and <sequence>/sharp/", 1,
            [](const std::string& d) { return is_gopro_folder(d); }, load_gopro, load_gopro_eval),
        "the GoPro layout (Nah et al.): pairs by file name within each sequence");
}

DeblurData load_deblur_data(const std::string& data, const DeblurDataOptions& options) {
  if (two_folders(options)) {
    check_two_folders(options);
    return load_two_folders(options);
  }
  return deblur_dataset_for(data).deblur(data, options);
}

std::vector<DeblurPair> load_deblur_eval_data(const std::string& data,
                                              const DeblurDataOptions& options) {
  if (two_folders(options)) {
    check_two_folders(options);
    std::vector<DeblurPair> train, val;
    split_pairs(read_pairs(options.blur_dir, options.sharp_dir, options.max_image_pixels), train,
                val, options.blur_dir);
    return val;
  }
  return deblur_dataset_for(data).deblur_eval(data, options);
}

}  // namespace igb::data
