#include "data/classify_data.h"

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/rng.h"
#include "data/datasets.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "data/opencv_samples.h"
#include "data/synthetic_shapes.h"

namespace igb::data {

namespace fs = std::filesystem;

namespace {

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw InputError("cannot read " + p.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint32_t be32(const std::string& s, size_t off) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(s[off + i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

/// Channel conversion, resize and normalisation shared by every source.
struct Preprocess {
  int64_t channels, height, width;
  std::vector<double> mean, std;
  bool augment;
  uint64_t seed;
  /// Random horizontal flips in augmentation (not for digits, which a mirror changes).
  bool flip = true;

  at::Tensor operator()(at::Tensor img, bool train, int64_t index, int64_t epoch) const {
    auto x = img.to(torch::kFloat32).div_(255.0f);
    if (x.size(0) == 1 && channels == 3) x = x.expand({3, x.size(1), x.size(2)});
    if (x.size(0) == 3 && channels == 1) x = rgb_to_y(x);
    const int64_t h = x.size(1), w = x.size(2);
    Rng rng =
        Rng::from(seed, static_cast<uint64_t>(epoch) * 7919 + 3, static_cast<uint64_t>(index));
    const bool small = height <= 64;
    if (small) {
      if (h != height || w != width)
        x = torch::upsample_bilinear2d(x.unsqueeze(0), {height, width}, false).squeeze(0);
      if (train && augment) {
        // CIFAR augmentation: pad 4 with zeros, random crop back, random horizontal flip.
        x = torch::constant_pad_nd(x, {4, 4, 4, 4});
        int64_t dy = rng.integer(0, 8), dx = rng.integer(0, 8);
        x = x.narrow(1, dy, height).narrow(2, dx, width);
        if (flip && rng.coin()) x = x.flip({2});
      }
    } else {
      // ImageNet style: shorter side to 256/224 of the input, then a random (train) or centre crop.
      const double s = (height * 256.0 / 224.0) / static_cast<double>(std::min(h, w));
      const int64_t nh = std::max(height, static_cast<int64_t>(std::lround(h * s)));
      const int64_t nw = std::max(width, static_cast<int64_t>(std::lround(w * s)));
      x = torch::upsample_bilinear2d(x.unsqueeze(0), {nh, nw}, false).squeeze(0);
      int64_t dy = (nh - height) / 2, dx = (nw - width) / 2;
      if (train && augment) {
        dy = rng.integer(0, nh - height);
        dx = rng.integer(0, nw - width);
      }
      x = x.narrow(1, dy, height).narrow(2, dx, width);
      if (train && augment && rng.coin()) x = x.flip({2});
    }
    auto m = torch::tensor(std::vector<float>(mean.begin(), mean.begin() + channels))
                 .view({channels, 1, 1});
    auto sd = torch::tensor(std::vector<float>(std.begin(), std.begin() + channels))
                  .view({channels, 1, 1});
    return ((x - m) / sd).contiguous();
  }
};

class TensorDataset : public Dataset {
 public:
  TensorDataset(LabeledImages data, Preprocess pre, bool train)
      : data_(std::move(data)), pre_(std::move(pre)), train_(train) {}
  int64_t size() const override { return data_.images.size(0); }
  Example get(int64_t index, int64_t epoch) const override {
    return {pre_(data_.images[index], train_, index, epoch), data_.labels[index]};
  }

 private:
  LabeledImages data_;
  Preprocess pre_;
  bool train_;
};

class FileDataset : public Dataset {
 public:
  FileDataset(std::vector<fs::path> files, std::vector<int64_t> labels, Preprocess pre, bool train,
              int64_t max_pixels)
      : files_(std::move(files)),
        labels_(std::move(labels)),
        pre_(std::move(pre)),
        train_(train),
        max_pixels_(max_pixels) {}
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  Example get(int64_t index, int64_t epoch) const override {
    auto img = (read_image(files_[index], max_pixels_) * 255).round().to(torch::kUInt8);
    return {pre_(img, train_, index, epoch), torch::tensor(labels_[index])};
  }

 private:
  std::vector<fs::path> files_;
  std::vector<int64_t> labels_;
  Preprocess pre_;
  bool train_;
  int64_t max_pixels_;
};

fs::path cifar_root(const fs::path& root) {
  if (fs::exists(root / "data_batch_1.bin")) return root;
  if (fs::exists(root / "cifar-10-batches-bin" / "data_batch_1.bin"))
    return root / "cifar-10-batches-bin";
  return {};
}

bool is_mnist(const fs::path& root) { return fs::exists(root / "train-images-idx3-ubyte"); }

bool has_class_folders(const fs::path& root) {
  fs::path base = fs::is_directory(root / "train") ? root / "train" : root;
  if (!fs::is_directory(base)) return false;
  return !list_subfolders(base).empty();
}

}  // namespace

LabeledImages synthetic_shape_images(int64_t count, int64_t size, uint64_t seed) {
  auto images = torch::empty({count, 3, size, size}, torch::kUInt8);
  auto labels = torch::empty({count}, torch::kInt64);
  auto acc = labels.accessor<int64_t, 1>();
  for (int64_t i = 0; i < count; ++i) {
    acc[i] = i % 10;
    images[i].copy_(render_synthetic_shape(i % 10, size, seed + static_cast<uint64_t>(i)));
  }
  return {images, labels};
}

namespace {

// Class sub-folders: <dir>/<class>/<image>; classes sorted by name. Every class folder there is
// must hold images; a split may lack a class (a small validation set), but not add one.
void class_files(const fs::path& dir, const std::vector<std::string>& classes,
                 std::vector<fs::path>& files, std::vector<int64_t>& labels) {
  for (const auto& name : list_subfolders(dir))
    if (std::find(classes.begin(), classes.end(), name) == classes.end())
      throw InputError("image folder " + dir.string() + ": class '" + name + "' (" +
                       (dir / name).string() +
                       ") is not a training class; training classes: " + join(classes));
  for (size_t c = 0; c < classes.size(); ++c) {
    if (!fs::is_directory(dir / classes[c])) continue;
    const auto images = list_images(dir / classes[c]);
    if (images.empty())
      throw InputError("image folder " + dir.string() + ": class '" + classes[c] + "' (" +
                       (dir / classes[c]).string() + ") holds no images (png, jpg, jpeg, bmp)");
    for (const auto& f : images) {
      files.push_back(f);
      labels.push_back(static_cast<int64_t>(c));
    }
  }
}

}  // namespace

LabeledImages read_cifar10_batches(const std::vector<fs::path>& files) {
  constexpr int64_t kRecord = 1 + 3 * 32 * 32;
  std::vector<at::Tensor> images, labels;
  for (const auto& f : files) {
    std::string bytes = read_bytes(f);
    if (bytes.empty() || bytes.size() % kRecord != 0)
      throw InputError("CIFAR-10 file " + f.string() +
                       " is truncated: " + std::to_string(bytes.size()) +
                       " bytes is not a whole number of 3073-byte records");
    const int64_t n = static_cast<int64_t>(bytes.size()) / kRecord;
    auto raw = torch::from_blob(bytes.data(), {n, kRecord}, torch::kUInt8).clone();
    auto lab = raw.select(1, 0).to(torch::kInt64);
    if (lab.max().item<int64_t>() > 9) {
      int64_t bad = lab.gt(9).nonzero()[0][0].item<int64_t>();
      throw InputError("CIFAR-10 file " + f.string() + ": record " + std::to_string(bad) +
                       " has label " + std::to_string(lab[bad].item<int64_t>()) + ", outside 0-9");
    }
    labels.push_back(lab);
    images.push_back(raw.narrow(1, 1, kRecord - 1).reshape({n, 3, 32, 32}));
  }
  return {torch::cat(images), torch::cat(labels)};
}

void write_cifar10_batch(const fs::path& file, const LabeledImages& d) {
  if (d.images.dim() != 4 || d.images.size(1) != 3 || d.images.size(2) != 32 ||
      d.images.size(3) != 32 || d.images.scalar_type() != torch::kUInt8)
    throw InputError("a CIFAR-10 batch holds uint8 images of 3x32x32");
  const int64_t n = d.images.size(0);
  if (d.labels.numel() != n ||
      (n > 0 && (d.labels.min().item<int64_t>() < 0 || d.labels.max().item<int64_t>() > 9)))
    throw InputError("a CIFAR-10 batch needs one label from 0 to 9 per image");
  const auto records =
      torch::cat({d.labels.to(torch::kUInt8).reshape({n, 1}), d.images.reshape({n, 3072})}, 1)
          .contiguous();
  write_text_atomically(file, std::string(reinterpret_cast<const char*>(records.data_ptr()),
                                          static_cast<size_t>(records.numel())));
}

LabeledImages read_mnist(const fs::path& images_path, const fs::path& labels_path) {
  std::string im = read_bytes(images_path), lb = read_bytes(labels_path);
  if (im.size() < 16 || be32(im, 0) != 2051)
    throw InputError("MNIST file " + images_path.string() +
                     " is not an IDX image file (magic 2051)");
  if (lb.size() < 8 || be32(lb, 0) != 2049)
    throw InputError("MNIST file " + labels_path.string() +
                     " is not an IDX label file (magic 2049)");
  const int64_t n = be32(im, 4), rows = be32(im, 8), cols = be32(im, 12), nl = be32(lb, 4);
  // Sides first, so the size check below cannot overflow on a crafted header.
  constexpr int64_t kMaxSide = 1 << 16;
  if (rows < 1 || cols < 1 || rows > kMaxSide || cols > kMaxSide)
    throw InputError("MNIST file " + images_path.string() + ": header says images of " +
                     std::to_string(rows) + "x" + std::to_string(cols) + ", not 1.." +
                     std::to_string(kMaxSide) + " pixels a side");
  if ((static_cast<int64_t>(im.size()) - 16) / (rows * cols) < n)
    throw InputError("MNIST file " + images_path.string() + " is truncated: header says " +
                     std::to_string(n) + " images of " + std::to_string(rows) + "x" +
                     std::to_string(cols));
  if (static_cast<int64_t>(lb.size()) < 8 + nl)
    throw InputError("MNIST file " + labels_path.string() + " is truncated: header says " +
                     std::to_string(nl) + " labels");
  if (nl != n)
    throw InputError("MNIST files disagree: " + std::to_string(n) + " images in " +
                     images_path.string() + " but " + std::to_string(nl) + " labels in " +
                     labels_path.string());
  auto images = torch::from_blob(im.data() + 16, {n, 1, rows, cols}, torch::kUInt8).clone();
  auto labels = torch::from_blob(lb.data() + 8, {n}, torch::kUInt8).to(torch::kInt64);
  if (n > 0 && labels.max().item<int64_t>() > 9) {
    int64_t bad = labels.gt(9).nonzero()[0][0].item<int64_t>();
    throw InputError("MNIST file " + labels_path.string() + ": label " + std::to_string(bad) +
                     " is " + std::to_string(labels[bad].item<int64_t>()) + ", outside 0-9");
  }
  return {images, labels};
}

DigitSplit digit_split(int64_t position_in_band) {
  const int64_t k = position_in_band % 10;
  return k < 7 ? DigitSplit::kTrain : k == 7 ? DigitSplit::kValidation : DigitSplit::kTest;
}

LabeledImages read_digit_sheet(const fs::path& path, int64_t max_pixels) {
  const auto rgb = read_image(path, max_pixels);
  const int64_t h = rgb.size(1), w = rgb.size(2);
  const int64_t rows = h / kDigitSide, cols = w / kDigitSide;
  if (h % kDigitSide != 0 || w % kDigitSide != 0 || rows == 0 || cols == 0 || rows % 10 != 0)
    throw InputError("digit sheet " + path.string() + " is " + std::to_string(w) + "x" +
                     std::to_string(h) + ": expected 20x20 digits in rows that split into ten " +
                     "bands, one per digit (OpenCV's digits.png is 2000x1000)");
  // Grey: the sheet's channels are equal; their mean undoes any colour a re-save added.
  const auto grey = (rgb.mean(0) * 255).round().to(torch::kUInt8);
  // [rows, 20, cols, 20] -> [rows, cols, 20, 20]: digits in reading order.
  const auto digits = grey.view({rows, kDigitSide, cols, kDigitSide})
                          .permute({0, 2, 1, 3})
                          .reshape({rows * cols, 1, kDigitSide, kDigitSide})
                          .contiguous();
  const int64_t per_digit = rows / 10 * cols;
  const auto labels = torch::arange(rows * cols, torch::kInt64).div(per_digit, "floor");
  return {digits, labels};
}

namespace {

Preprocess preprocess_for(const ClassifyDataOptions& o, std::vector<double> mean,
                          std::vector<double> std) {
  return {o.input_shape[1],
          o.input_shape[2],
          o.input_shape[3],
          std::move(mean),
          std::move(std),
          o.augment,
          o.seed};
}

ClassifyData load_synthetic_shapes(const std::string&, const ClassifyDataOptions& o) {
  ClassifyData d;
  const auto pre = preprocess_for(o, {0.5, 0.5, 0.5}, {0.25, 0.25, 0.25});
  d.classes = synthetic_shape_classes();
  d.train = std::make_unique<TensorDataset>(
      synthetic_shape_images(o.synthetic_train, 32, 10'000'000), pre, true);
  d.val = std::make_unique<TensorDataset>(synthetic_shape_images(o.synthetic_val, 32, 20'000'000),
                                          pre, false);
  d.description = "synthetic shapes (" + std::to_string(o.synthetic_train) + " training, " +
                  std::to_string(o.synthetic_val) + " validation images, 10 classes)";
  return d;
}

ClassifyData load_cifar10(const std::string& data, const ClassifyDataOptions& o) {
  fs::path dir = cifar_root(data);
  if (dir.empty()) throw InputError("data folder " + data + " has no CIFAR-10 data_batch_1.bin");
  std::vector<fs::path> train_files;
  for (int i = 1; i <= 5; ++i)
    if (fs::exists(dir / ("data_batch_" + std::to_string(i) + ".bin")))
      train_files.push_back(dir / ("data_batch_" + std::to_string(i) + ".bin"));
  if (!fs::exists(dir / "test_batch.bin"))
    throw InputError("CIFAR-10 folder " + dir.string() + " has no test_batch.bin");
  const auto pre = preprocess_for(o, {0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616});
  ClassifyData d;
  d.classes = {"airplane", "automobile", "bird",  "cat",  "deer",
               "dog",      "frog",       "horse", "ship", "truck"};
  auto train = read_cifar10_batches(train_files),
       val = read_cifar10_batches({dir / "test_batch.bin"});
  d.description = "CIFAR-10 " + dir.string() + " (" + std::to_string(train.labels.size(0)) +
                  " training, " + std::to_string(val.labels.size(0)) + " test images)";
  d.train = std::make_unique<TensorDataset>(std::move(train), pre, true);
  d.val = std::make_unique<TensorDataset>(std::move(val), pre, false);
  return d;
}

ClassifyData load_mnist(const std::string& data, const ClassifyDataOptions& o) {
  fs::path root(data);
  for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    if (!fs::exists(root / f)) throw InputError("MNIST folder " + data + " has no " + f);
  const auto pre = preprocess_for(o, {0.1307, 0.1307, 0.1307}, {0.3081, 0.3081, 0.3081});
  ClassifyData d;
  d.classes = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  auto train = read_mnist(root / "train-images-idx3-ubyte", root / "train-labels-idx1-ubyte");
  auto val = read_mnist(root / "t10k-images-idx3-ubyte", root / "t10k-labels-idx1-ubyte");
  d.description = "MNIST " + data + " (" + std::to_string(train.labels.size(0)) + " training, " +
                  std::to_string(val.labels.size(0)) + " test images)";
  d.train = std::make_unique<TensorDataset>(std::move(train), pre, true);
  d.val = std::make_unique<TensorDataset>(std::move(val), pre, false);
  return d;
}

/// The digits of `all` (read_digit_sheet) in `split`.
LabeledImages digits_of(const LabeledImages& all, DigitSplit split) {
  const int64_t per_digit = all.labels.size(0) / 10;
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < all.labels.size(0); ++i)
    if (digit_split(i % per_digit) == split) keep.push_back(i);
  const auto index = torch::tensor(keep, torch::kInt64);
  return {all.images.index_select(0, index), all.labels.index_select(0, index)};
}

// --data digits: OpenCV's digit sheet from Debian's opencv-doc, in its fixed split.
ClassifyData load_digits(const std::string&, const ClassifyDataOptions& o) {
  const auto all =
      read_digit_sheet(opencv_sample("digits.png", "--data digits"), o.max_image_pixels);
  auto pre = preprocess_for(o, {0.1307, 0.1307, 0.1307}, {0.3081, 0.3081, 0.3081});
  pre.flip = false;
  ClassifyData d;
  d.classes = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  auto train = digits_of(all, DigitSplit::kTrain);
  auto val = digits_of(all, o.test_split ? DigitSplit::kTest : DigitSplit::kValidation);
  d.description = "digits (OpenCV's digits.png: " + std::to_string(train.labels.size(0)) +
                  " training, " + std::to_string(val.labels.size(0)) +
                  (o.test_split ? " test" : " validation") + " digits of 20x20)";
  d.train = std::make_unique<TensorDataset>(std::move(train), pre, true);
  d.val = std::make_unique<TensorDataset>(std::move(val), pre, false);
  return d;
}

/// Image files and their class indices.
struct LabeledFiles {
  std::vector<fs::path> files;
  std::vector<int64_t> labels;
};

// Holds out every tenth image (files are grouped by class, so every class gives some).
void hold_out_every_tenth(LabeledFiles& train, LabeledFiles& val) {
  LabeledFiles all = std::move(train);
  train = {};
  for (size_t i = 0; i < all.files.size(); ++i) {
    LabeledFiles& to = i % 10 == 9 ? val : train;
    to.files.push_back(all.files[i]);
    to.labels.push_back(all.labels[i]);
  }
}

ClassifyData load_image_folder(const std::string& data, const ClassifyDataOptions& o) {
  fs::path root(data);
  const auto pre = preprocess_for(o, {0.485, 0.456, 0.406}, {0.229, 0.224, 0.225});
  const bool split = fs::is_directory(root / "train");
  fs::path train_dir = split ? root / "train" : root, val_dir;
  if (split)
    for (const char* v : {"val", "valid", "validation", "test"})
      if (fs::is_directory(root / v)) {
        val_dir = root / v;
        break;
      }
  if (!fs::is_directory(train_dir)) throw InputError("data folder " + data + " does not exist");
  ClassifyData d;
  d.classes = list_subfolders(train_dir);
  if (d.classes.size() < 2)
    throw InputError("image folder " + train_dir.string() +
                     " needs one sub-folder per class, at least two");
  LabeledFiles train, val;
  class_files(train_dir, d.classes, train.files, train.labels);
  if (!val_dir.empty())
    class_files(val_dir, d.classes, val.files, val.labels);
  else
    hold_out_every_tenth(train, val);
  if (train.files.empty())
    throw InputError("image folder " + train_dir.string() +
                     " holds no images (png, jpg, jpeg, bmp)");
  if (val.files.empty()) throw InputError("image folder " + data + " has no validation images");
  // The images are decoded batch by batch while training; a broken one is found now, before a
  // run directory is created or changed.
  for (const auto* files : {&train.files, &val.files})
    for (const auto& f : *files) check_image(f, o.max_image_pixels);
  d.description = "image folder " + data + " (" + std::to_string(train.files.size()) +
                  " training, " + std::to_string(val.files.size()) + " validation images, " +
                  std::to_string(d.classes.size()) + " classes)";
  d.train = std::make_unique<FileDataset>(std::move(train.files), std::move(train.labels), pre,
                                          true, o.max_image_pixels);
  d.val = std::make_unique<FileDataset>(std::move(val.files), std::move(val.labels), pre, false,
                                        o.max_image_pixels);
  return d;
}

DatasetSpec classify_spec(std::string selected_by, int order,
                          std::function<bool(const std::string&)> recognises,
                          ClassifyDatasetFactory factory) {
  DatasetSpec s;
  s.family = "classify";
  s.selected_by = std::move(selected_by);
  s.recognise_order = order;
  s.recognises = std::move(recognises);
  s.classify = std::move(factory);
  return s;
}

}  // namespace

void register_classify_datasets(Registry<DatasetSpec>& r) {
  // Recognition order: synthetic, then the specific file layouts, then any class sub-folders.
  r.add("classify/synthetic",
        classify_spec(
            "--data synthetic", 0, [](const std::string& d) { return d == "synthetic"; },
            load_synthetic_shapes),
        "seeded 10-class synthetic shapes at the model's input size");
  DatasetSpec digits = classify_spec(
      "--data digits", 0, [](const std::string& d) { return d == "digits"; }, load_digits);
  digits.unavailable = [] { return opencv_sample_unavailable("digits.png"); };
  r.add("classify/digits", digits,
        "OpenCV's 5,000 handwritten digits (digits.png of Debian's opencv-doc, 20x20, 500 per "
        "class): 3,500 train, 500 validate, 1,000 test");
  r.add("classify/cifar10",
        classify_spec(
            "a folder with data_batch_1..5.bin and test_batch.bin", 1,
            [](const std::string& d) { return !cifar_root(d).empty(); }, load_cifar10),
        "CIFAR-10 binary version (one label byte + 3072 pixel bytes per record)");
  r.add("classify/mnist",
        classify_spec(
            "a folder with the four IDX files", 2, [](const std::string& d) { return is_mnist(d); },
            load_mnist),
        "MNIST IDX (magic 2051 images, 2049 labels)");
  r.add("classify/imagefolder",
        classify_spec(
            "a folder with train/<class>/ and val/<class>/", 3,
            [](const std::string& d) { return has_class_folders(d); }, load_image_folder),
        "one sub-folder of images per class, ImageNet style");
}

std::string detect_classify_dataset(const std::string& data) {
  if (data != "synthetic" && data != "digits") {
    if (!fs::exists(data)) throw InputError("data folder " + data + " does not exist");
    if (!fs::is_directory(data)) throw InputError("data path " + data + " is not a folder");
  }
  auto name = recognise_dataset("classify", data);
  if (name.empty())
    throw InputError("data folder " + data +
                     " is not a recognised dataset: expected CIFAR-10 binaries (data_batch_1.bin "
                     "…), MNIST IDX files "
                     "(train-images-idx3-ubyte …) or one sub-folder of images per class");
  return name;
}

ClassifyData load_classify_data(const std::string& data, const ClassifyDataOptions& o) {
  const std::string name = o.dataset == "auto" ? detect_classify_dataset(data) : o.dataset;
  if (name != "synthetic" && name != "digits" && (data == "synthetic" || data == "digits"))
    throw InputError("--dataset " + name + " needs --data FOLDER");
  ClassifyData d = dataset_spec("classify", name).classify(data, o);
  d.dataset = name;
  return d;
}

}  // namespace igb::data
