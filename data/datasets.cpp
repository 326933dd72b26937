#include "data/datasets.h"

#include <mutex>

namespace igb::data {

Registry<DatasetSpec>& dataset_registry() {
  static Registry<DatasetSpec> registry("dataset");
  return registry;
}

void register_builtin_datasets() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = dataset_registry();
    r.add("sr/synthetic", {"sr", "--data synthetic"},
          "seeded synthetic images (gradients, edges, textures, text-like strokes); LR by bicubic imresize");
    r.add("sr/bsds300", {"sr", "a folder with images/train and images/test"},
          "BSDS300 layout; HR crops, LR by MATLAB-compatible bicubic imresize");
    r.add("sr/train-val", {"sr", "a folder with train/ and val|valid|validation|test/"},
          "two image folders (DIV2K-style); LR by bicubic imresize");
    r.add("sr/flat", {"sr", "a folder of images"}, "every tenth image held out for validation (Set5, Set14 for testing)");
    r.add("classify/synthetic", {"classify", "--data synthetic"}, "seeded 10-class synthetic shapes at the model's input size");
    r.add("classify/cifar10", {"classify", "a folder with data_batch_1..5.bin and test_batch.bin"},
          "CIFAR-10 binary version (one label byte + 3072 pixel bytes per record)");
    r.add("classify/mnist", {"classify", "a folder with the four IDX files"},
          "MNIST IDX (magic 2051 images, 2049 labels)");
    r.add("classify/imagefolder", {"classify", "a folder with train/<class>/ and val/<class>/"},
          "one sub-folder of images per class, ImageNet style");
    r.freeze();
  });
}

std::vector<std::string> dataset_names(const std::string& family) {
  register_builtin_datasets();
  std::vector<std::string> out;
  for (const auto& n : dataset_registry().names())
    if (dataset_registry().entry(n).factory.family == family) out.push_back(n.substr(family.size() + 1));
  return out;
}

}  // namespace igb::data
