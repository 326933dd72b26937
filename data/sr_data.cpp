#include "data/sr_data.h"

#include "core/error.h"
#include "core/rng.h"
#include "data/datasets.h"
#include "data/dead_leaves.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "data/opencv_samples.h"
#include "data/resize.h"
#include "data/synthetic_images.h"

namespace igb::data {

namespace fs = std::filesystem;

namespace {
constexpr uint64_t kSyntheticTrainSeed = 1000;
constexpr uint64_t kSyntheticValSeed = 900000;

at::Tensor to_model_channels(const at::Tensor& rgb, bool y_channel) {
  return y_channel ? rgb_to_y(rgb) : rgb;
}

/// How much detail an RGB patch holds: the mean absolute difference between neighbouring pixels
/// of its channel mean, across and down. Flat sky scores near 0, texture and edges high.
double detail(const at::Tensor& rgb) {
  const auto g = rgb.mean(0);
  const int64_t h = g.size(0), w = g.size(1);
  const auto down = (g.narrow(0, 1, h - 1) - g.narrow(0, 0, h - 1)).abs().mean();
  const auto across = (g.narrow(1, 1, w - 1) - g.narrow(1, 0, w - 1)).abs().mean();
  return (down + across).item<double>();
}
}  // namespace

at::Tensor modcrop(const at::Tensor& image, int64_t scale) {
  int64_t h = image.size(-2) - image.size(-2) % scale, w = image.size(-1) - image.size(-1) % scale;
  return image.narrow(-2, 0, h).narrow(-1, 0, w);
}

at::Tensor degrade_bicubic(const at::Tensor& hr_rgb, int64_t scale) {
  return quantize_8bit(imresize(hr_rgb, 1.0 / static_cast<double>(scale)));
}

SrTrainSet::SrTrainSet(std::vector<at::Tensor> images, SrDataOptions options,
                       std::vector<int64_t> patches)
    : images_(std::move(images)),
      options_(options),
      plan_(images_.size(), options_.patches_per_image, patches) {}

int64_t SrTrainSet::size() const { return plan_.size(); }

Example SrTrainSet::get(int64_t index, int64_t epoch) const {
  const size_t image = plan_.image(index);
  const auto& img = images_[image];
  Rng rng = Rng::from(options_.seed, static_cast<uint64_t>(epoch) * 0x10001 + 7,
                      static_cast<uint64_t>(index));
  const int64_t p = options_.patch_size;
  int64_t y = rng.integer(0, img.size(1) - p), x = rng.integer(0, img.size(2) - p);
  auto hr = img.narrow(1, y, p).narrow(2, x, p);
  // Informative patches: of `patch_candidates` random crops, the one with the most detail.
  if (options_.patch_candidates > 1) {
    double best = detail(hr);
    for (int64_t c = 1; c < options_.patch_candidates; ++c) {
      const int64_t cy = rng.integer(0, img.size(1) - p), cx = rng.integer(0, img.size(2) - p);
      auto candidate = img.narrow(1, cy, p).narrow(2, cx, p);
      const double d = detail(candidate);
      if (d > best) best = d, hr = std::move(candidate);
    }
  }
  if (options_.augment) {
    if (rng.coin()) hr = hr.flip({2});
    if (rng.coin()) hr = hr.flip({1});
    if (rng.coin()) hr = hr.transpose(1, 2);
  }
  hr = hr.contiguous();
  auto lr = degrade_bicubic(hr, options_.scale);
  return {to_model_channels(lr, options_.y_channel), to_model_channels(hr, options_.y_channel)};
}

std::vector<SrEvalImage> make_sr_eval_images(const std::vector<at::Tensor>& hr_rgb,
                                             const std::vector<std::string>& names,
                                             const SrDataOptions& options) {
  std::vector<SrEvalImage> out;
  for (size_t i = 0; i < hr_rgb.size(); ++i) {
    SrEvalImage e;
    e.name = names[i];
    e.hr_rgb = modcrop(hr_rgb[i], options.scale).contiguous();
    if (e.hr_rgb.size(1) < 4 * options.scale || e.hr_rgb.size(2) < 4 * options.scale)
      throw InputError("validation image " + names[i] + " is too small for scale " +
                       std::to_string(options.scale));
    auto lr_rgb = degrade_bicubic(e.hr_rgb, options.scale);
    e.lr = to_model_channels(lr_rgb, options.y_channel);
    e.bicubic_rgb = quantize_8bit(imresize(lr_rgb, static_cast<double>(options.scale)));
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

std::vector<at::Tensor> read_all(const std::vector<fs::path>& paths,
                                 std::vector<std::string>* names, int64_t max_pixels) {
  std::vector<at::Tensor> out;
  for (const auto& p : paths) {
    out.push_back(read_image(p, max_pixels));
    if (names) names->push_back(p.filename().string());
  }
  return out;
}

/// Every training image holds a patch, else InputError naming the first that does not.
void check_patch_fits(const std::vector<at::Tensor>& images, const std::vector<std::string>& names,
                      int64_t patch_size) {
  for (size_t i = 0; i < images.size(); ++i)
    if (images[i].size(1) < patch_size || images[i].size(2) < patch_size)
      throw InputError("training image " + names[i] + " (" + std::to_string(images[i].size(2)) +
                       "x" + std::to_string(images[i].size(1)) + ") is smaller than the " +
                       std::to_string(patch_size) + "-pixel patch size");
}

/// An image generator: [3, height, width] from a seed.
using RenderImage = at::Tensor (*)(int64_t height, int64_t width, uint64_t seed);

/// `count` generated images of the options' size from seed `base` on, named <prefix>_<i>.png.
std::vector<at::Tensor> generated_images(RenderImage render, const std::string& prefix,
                                         int64_t count, uint64_t base, const SrDataOptions& o,
                                         std::vector<std::string>* names) {
  std::vector<at::Tensor> out;
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(render(o.synthetic_size, o.synthetic_size, base + static_cast<uint64_t>(i)));
    if (names) names->push_back(prefix + "_" + std::to_string(i) + ".png");
  }
  return out;
}

/// Generated training and validation images (seeds kSyntheticTrainSeed.., kSyntheticValSeed..).
SrData load_generated(RenderImage render, const std::string& prefix, const std::string& label,
                      const SrDataOptions& options) {
  std::vector<std::string> val_names;
  auto train = generated_images(render, prefix, options.synthetic_train_images, kSyntheticTrainSeed,
                                options, nullptr);
  auto val = generated_images(render, prefix, options.synthetic_val_images, kSyntheticValSeed,
                              options, &val_names);
  SrData d;
  d.description = label + " (" + std::to_string(train.size()) + " training, " +
                  std::to_string(val.size()) + " validation images)";
  d.train = std::make_unique<SrTrainSet>(std::move(train), options);
  d.val = make_sr_eval_images(val, val_names, options);
  return d;
}

std::vector<SrEvalImage> load_generated_eval(RenderImage render, const std::string& prefix,
                                             const SrDataOptions& options) {
  std::vector<std::string> names;
  auto val = generated_images(render, prefix, options.synthetic_val_images, kSyntheticValSeed,
                              options, &names);
  return make_sr_eval_images(val, names, options);
}

SrData load_sr_synthetic(const std::string&, const SrDataOptions& options) {
  return load_generated(render_synthetic_image, "synthetic", "synthetic", options);
}

std::vector<SrEvalImage> load_sr_synthetic_eval(const std::string&, const SrDataOptions& options) {
  return load_generated_eval(render_synthetic_image, "synthetic", options);
}

SrData load_sr_dead_leaves(const std::string&, const SrDataOptions& options) {
  return load_generated(render_dead_leaves, "dead_leaves", "dead leaves", options);
}

std::vector<SrEvalImage> load_sr_dead_leaves_eval(const std::string&,
                                                  const SrDataOptions& options) {
  return load_generated_eval(render_dead_leaves, "dead_leaves", options);
}

// --data photos: the training photographs (patches by area), validated on the held-out ones.
SrData load_sr_photos(const std::string&, const SrDataOptions& options) {
  auto train = read_photos(training_photos(), "--data photos", options.max_image_pixels);
  auto val = read_photos(held_out_photos(), "--data photos", options.max_image_pixels);
  check_patch_fits(train, training_photos(), options.patch_size);
  auto patches = patches_by_area(train, options.patches_per_image, options.synthetic_size);
  SrData d;
  d.description = "photos (" + std::to_string(train.size()) + " training photographs, " +
                  std::to_string(val.size()) + " held out)";
  d.train = std::make_unique<SrTrainSet>(std::move(train), options, std::move(patches));
  d.val = make_sr_eval_images(val, held_out_photos(), options);
  return d;
}

std::vector<SrEvalImage> load_sr_photos_eval(const std::string&, const SrDataOptions& options) {
  return make_sr_eval_images(
      read_photos(held_out_photos(), "--data photos", options.max_image_pixels), held_out_photos(),
      options);
}

SrData load_sr_folder(const std::string& data, const SrDataOptions& options) {
  ImageSplit split = split_image_folder(data);
  std::vector<std::string> val_names;
  auto train = read_all(split.train, nullptr, options.max_image_pixels);
  auto val = read_all(split.val, &val_names, options.max_image_pixels);
  std::vector<std::string> train_names;
  for (const auto& p : split.train) train_names.push_back(p.string());
  check_patch_fits(train, train_names, options.patch_size);
  SrData d;
  d.description = data + " (" + split.layout + ": " + std::to_string(train.size()) + " training, " +
                  std::to_string(val.size()) + " validation images)";
  d.train = std::make_unique<SrTrainSet>(std::move(train), options);
  d.val = make_sr_eval_images(val, val_names, options);
  return d;
}

std::vector<SrEvalImage> load_sr_folder_eval(const std::string& data,
                                             const SrDataOptions& options) {
  // A held-out split when the folder has one; otherwise every image (a test set like Set5).
  ImageSplit split = split_image_folder_or_all(data);
  std::vector<std::string> names;
  auto val = read_all(split.val, &names, options.max_image_pixels);
  return make_sr_eval_images(val, names, options);
}

DatasetSpec sr_spec(std::string selected_by, int order,
                    std::function<bool(const std::string&)> recognises, SrDatasetFactory load,
                    SrEvalFactory eval) {
  DatasetSpec s;
  s.family = "sr";
  s.selected_by = std::move(selected_by);
  s.recognise_order = order;
  s.recognises = std::move(recognises);
  s.sr = std::move(load);
  s.sr_eval = std::move(eval);
  return s;
}

const DatasetSpec& sr_dataset_for(const std::string& data) {
  // "folder" recognises every value but "synthetic", so this always finds an entry.
  return dataset_spec("sr", recognise_dataset("sr", data));
}

}  // namespace

void register_sr_datasets(Registry<DatasetSpec>& r) {
  r.add("sr/synthetic",
        sr_spec(
            "--data synthetic", 0, [](const std::string& d) { return d == "synthetic"; },
            load_sr_synthetic, load_sr_synthetic_eval),
        "seeded synthetic images (gradients, edges, textures, text-like strokes); LR by bicubic "
        "imresize");
  DatasetSpec photos = sr_spec(
      "--data photos", 0, [](const std::string& d) { return d == "photos"; }, load_sr_photos,
      load_sr_photos_eval);
  photos.unavailable = photos_unavailable;
  r.add("sr/photos", photos,
        "the photographs of Debian's opencv-doc: 20 to train on, patches in proportion to their "
        "area, and 10 held out (baboon, building, butterfly, ...) to validate and test on; "
        "data/opencv_samples.cpp lists the split");
  r.add("sr/dead-leaves",
        sr_spec(
            "--data dead-leaves", 0, [](const std::string& d) { return d == "dead-leaves"; },
            load_sr_dead_leaves, load_sr_dead_leaves_eval),
        "seeded dead-leaves images: occluding shapes with radii of density r^-3, some textured "
        "(Achddou et al. 2021), which share the edge statistics of photographs");
  // The folder's layout (BSDS300, train/ + val/, or flat) is recognised by split_image_folder.
  r.add("sr/folder",
        sr_spec(
            "a folder of images: images/train + images/test (BSDS300), train/ + "
            "val|valid|validation|test/, "
            "or flat",
            1,
            [](const std::string& d) {
              return d != "synthetic" && d != "dead-leaves" && d != "photos";
            },
            load_sr_folder, load_sr_folder_eval),
        "HR images, LR by MATLAB-compatible bicubic imresize; a flat folder holds out every tenth "
        "image for "
        "validation (and is tested whole: Set5, Set14)");
}

SrData load_sr_data(const std::string& data, const SrDataOptions& options) {
  return sr_dataset_for(data).sr(data, options);
}

std::vector<SrEvalImage> load_sr_eval_data(const std::string& data, const SrDataOptions& options) {
  return sr_dataset_for(data).sr_eval(data, options);
}

}  // namespace igb::data
