#include "data/sr_data.h"

#include "core/error.h"
#include "core/rng.h"
#include "data/datasets.h"
#include "data/image.h"
#include "data/image_folder.h"
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
}  // namespace

at::Tensor modcrop(const at::Tensor& image, int64_t scale) {
  int64_t h = image.size(-2) - image.size(-2) % scale, w = image.size(-1) - image.size(-1) % scale;
  return image.narrow(-2, 0, h).narrow(-1, 0, w);
}

at::Tensor degrade_bicubic(const at::Tensor& hr_rgb, int64_t scale) {
  return quantize_8bit(imresize(hr_rgb, 1.0 / static_cast<double>(scale)));
}

SrTrainSet::SrTrainSet(std::vector<at::Tensor> images, SrDataOptions options)
    : images_(std::move(images)), options_(options) {}

int64_t SrTrainSet::size() const {
  return static_cast<int64_t>(images_.size()) * options_.patches_per_image;
}

Example SrTrainSet::get(int64_t index, int64_t epoch) const {
  const auto& img = images_[index % images_.size()];
  Rng rng = Rng::from(options_.seed, static_cast<uint64_t>(epoch) * 0x10001 + 7,
                      static_cast<uint64_t>(index));
  const int64_t p = options_.patch_size;
  int64_t y = rng.integer(0, img.size(1) - p), x = rng.integer(0, img.size(2) - p);
  auto hr = img.narrow(1, y, p).narrow(2, x, p);
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

void synthetic_val(const SrDataOptions& o, std::vector<at::Tensor>& imgs,
                   std::vector<std::string>& names) {
  for (int64_t i = 0; i < o.synthetic_val_images; ++i) {
    imgs.push_back(
        render_synthetic_image(o.synthetic_size, o.synthetic_size, kSyntheticValSeed + i));
    names.push_back("synthetic_" + std::to_string(i) + ".png");
  }
}

SrData load_sr_synthetic(const std::string&, const SrDataOptions& options) {
  std::vector<at::Tensor> train, val;
  std::vector<std::string> val_names;
  for (int64_t i = 0; i < options.synthetic_train_images; ++i)
    train.push_back(render_synthetic_image(options.synthetic_size, options.synthetic_size,
                                           kSyntheticTrainSeed + i));
  synthetic_val(options, val, val_names);
  SrData d;
  d.description = "synthetic (" + std::to_string(train.size()) + " training, " +
                  std::to_string(val.size()) + " validation images)";
  d.train = std::make_unique<SrTrainSet>(std::move(train), options);
  d.val = make_sr_eval_images(val, val_names, options);
  return d;
}

std::vector<SrEvalImage> load_sr_synthetic_eval(const std::string&, const SrDataOptions& options) {
  std::vector<at::Tensor> val;
  std::vector<std::string> names;
  synthetic_val(options, val, names);
  return make_sr_eval_images(val, names, options);
}

SrData load_sr_folder(const std::string& data, const SrDataOptions& options) {
  ImageSplit split = split_image_folder(data);
  std::vector<std::string> val_names;
  auto train = read_all(split.train, nullptr, options.max_image_pixels);
  auto val = read_all(split.val, &val_names, options.max_image_pixels);
  for (size_t i = 0; i < train.size(); ++i)
    if (train[i].size(1) < options.patch_size || train[i].size(2) < options.patch_size)
      throw InputError("training image " + split.train[i].string() + " (" +
                       std::to_string(train[i].size(2)) + "x" + std::to_string(train[i].size(1)) +
                       ") is smaller than the " + std::to_string(options.patch_size) +
                       "-pixel patch size");
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
  // The folder's layout (BSDS300, train/ + val/, or flat) is recognised by split_image_folder.
  r.add("sr/folder",
        sr_spec(
            "a folder of images: images/train + images/test (BSDS300), train/ + "
            "val|valid|validation|test/, "
            "or flat",
            1, [](const std::string& d) { return d != "synthetic"; }, load_sr_folder,
            load_sr_folder_eval),
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
