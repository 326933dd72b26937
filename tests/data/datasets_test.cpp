// The dataset registry: names, recognition order, and the factories the drivers reach through it.
#include "data/datasets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "tests/support.h"

namespace igb::data {

namespace fs = std::filesystem;

namespace {

using test::input_error_of;

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p).put('\0');
}

}  // namespace

TEST(Datasets, EachFamilyListsItsEntriesAndEveryEntryFillsItsFamilysFactories) {
  EXPECT_EQ(dataset_names("classify"),
            (std::vector<std::string>{"cifar10", "digits", "imagefolder", "mnist", "synthetic"}));
  EXPECT_EQ(dataset_names("sr"),
            (std::vector<std::string>{"dead-leaves", "folder", "photos", "synthetic"}));
  for (const auto& name : dataset_registry().names()) {
    const auto& spec = dataset_registry().get(name);
    EXPECT_EQ(name.substr(0, name.find('/')), spec.family) << name;
    EXPECT_TRUE(spec.recognises) << name;
    EXPECT_FALSE(spec.selected_by.empty()) << name;
    EXPECT_EQ(static_cast<bool>(spec.classify), spec.family == "classify") << name;
    EXPECT_EQ(static_cast<bool>(spec.sr), spec.family == "sr") << name;
    EXPECT_EQ(static_cast<bool>(spec.sr_eval), spec.family == "sr") << name;
  }
}

TEST(Datasets, AnUnknownNameListsTheValidOnes) {
  const std::string want =
      "unknown dataset 'cifar100'; valid datasets: cifar10, digits, imagefolder, mnist, synthetic";
  EXPECT_EQ(input_error_of([] { dataset_spec("classify", "cifar100"); }), want);
  test::TempDir tmp;
  ClassifyDataOptions o;
  o.dataset = "cifar100";
  EXPECT_EQ(input_error_of([&] { load_classify_data(tmp.path().string(), o); }), want);
  EXPECT_EQ(input_error_of([] { dataset_spec("sr", "div2k"); }),
            "unknown dataset 'div2k'; valid datasets: dead-leaves, folder, photos, synthetic");
}

TEST(Datasets, TheRegistryBuildsSyntheticShapesOfTheRequestedSize) {
  ClassifyDataOptions o;
  o.synthetic_train = 23;
  o.synthetic_val = 7;
  o.input_shape = {1, 1, 28, 28};
  o.augment = false;
  auto d = dataset_spec("classify", "synthetic").classify("synthetic", o);
  EXPECT_EQ(d.train->size(), 23);
  EXPECT_EQ(d.val->size(), 7);
  EXPECT_EQ(d.classes.size(), 10u);
  EXPECT_EQ(d.description, "synthetic shapes (23 training, 7 validation images, 10 classes)");
  // Labels cycle through the classes; images come out at the model's channels and size.
  const auto e = d.train->get(13, 0);
  EXPECT_EQ(e.target.item<int64_t>(), 3);
  EXPECT_EQ(e.input.sizes(), torch::IntArrayRef({1, 28, 28}));
  // load_classify_data goes through the same entry and names it.
  o.dataset = "auto";
  auto loaded = load_classify_data("synthetic", o);
  EXPECT_EQ(loaded.dataset, "synthetic");
  EXPECT_TRUE(torch::equal(loaded.val->get(5, 0).input, d.val->get(5, 0).input));
}

TEST(Datasets, TheRegistryBuildsSyntheticSrDataOfTheRequestedSize) {
  SrDataOptions o;
  o.scale = 2;
  o.patch_size = 16;
  o.patches_per_image = 3;
  o.synthetic_train_images = 4;
  o.synthetic_val_images = 2;
  o.synthetic_size = 40;
  auto d = load_sr_data("synthetic", o);
  EXPECT_EQ(d.train->size(), 12);
  EXPECT_EQ(d.description, "synthetic (4 training, 2 validation images)");
  ASSERT_EQ(d.val.size(), 2u);
  EXPECT_EQ(d.val[1].name, "synthetic_1.png");
  EXPECT_EQ(d.val[1].hr_rgb.sizes(), torch::IntArrayRef({3, 40, 40}));
  EXPECT_EQ(d.val[1].lr.sizes(), torch::IntArrayRef({1, 20, 20}));
  const auto eval = load_sr_eval_data("synthetic", o);
  ASSERT_EQ(eval.size(), 2u);
  EXPECT_TRUE(torch::equal(eval[0].lr, d.val[0].lr));
}

// Recognition follows each entry's rank, not the names' order: "imagefolder" sorts before
// "mnist", but any folder with a sub-folder looks like class folders, so it must be tried last.
TEST(Datasets, RecognitionTriesTheSpecificLayoutsBeforeClassFolders) {
  test::TempDir tmp;
  touch(tmp / "mnist" / "train-images-idx3-ubyte");
  fs::create_directories(tmp / "mnist" / "extra");
  touch(tmp / "cifar" / "cifar-10-batches-bin" / "data_batch_1.bin");
  fs::create_directories(tmp / "classes" / "cat");
  fs::create_directories(tmp / "empty");
  EXPECT_EQ(recognise_dataset("classify", (tmp / "mnist").string()), "mnist");
  EXPECT_EQ(recognise_dataset("classify", (tmp / "cifar").string()), "cifar10");
  EXPECT_EQ(recognise_dataset("classify", (tmp / "classes").string()), "imagefolder");
  EXPECT_EQ(recognise_dataset("classify", (tmp / "empty").string()), "");
  EXPECT_EQ(recognise_dataset("classify", "synthetic"), "synthetic");
  EXPECT_EQ(recognise_dataset("sr", "synthetic"), "synthetic");
  EXPECT_EQ(recognise_dataset("sr", (tmp / "empty").string()), "folder");
}

}  // namespace igb::data
