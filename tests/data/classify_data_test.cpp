#include "data/classify_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "data/image.h"
#include "data/synthetic_shapes.h"
#include "tests/support.h"

namespace igb::data {

namespace fs = std::filesystem;

namespace {

class ClassifyDataTest : public ::testing::Test {
 protected:
  // A CIFAR-10 record: label, then R, G, B planes; pixel (y, x) of channel c = (c*50 + y + x +
  // label) % 256.
  static std::string cifar_record(uint8_t label) {
    std::string r(1, static_cast<char>(label));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) r.push_back(static_cast<char>((c * 50 + y + x + label) % 256));
    return r;
  }
  void write(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  static std::string be32(uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
            static_cast<char>(v)};
  }
  void write_mnist(const std::string& prefix, int n, int label_count, uint32_t image_magic = 2051) {
    std::string im = be32(image_magic) + be32(n) + be32(28) + be32(28);
    for (int i = 0; i < n; ++i)
      for (int p = 0; p < 28 * 28; ++p) im.push_back(static_cast<char>((p + i * 3) % 256));
    std::string lb = be32(2049) + be32(label_count);
    for (int i = 0; i < label_count; ++i) lb.push_back(static_cast<char>(i % 10));
    write(root_ / (prefix + "-images-idx3-ubyte"), im);
    write(root_ / (prefix + "-labels-idx1-ubyte"), lb);
  }
  test::TempDir tmp_;
  fs::path root_ = tmp_.path();
};

}  // namespace

TEST_F(ClassifyDataTest, WrittenCifar10BatchesHoldTheRecordsByteForByte) {
  const auto shapes = synthetic_shape_images(12, 32, 77);
  write_cifar10_batch(root_ / "data_batch_1.bin", shapes);
  // 12 records of 3073 bytes: the label, then the R, G, B planes.
  EXPECT_EQ(fs::file_size(root_ / "data_batch_1.bin"), 12u * 3073u);
  const auto back = read_cifar10_batches({root_ / "data_batch_1.bin"});
  EXPECT_TRUE(torch::equal(back.images, shapes.images));
  EXPECT_TRUE(torch::equal(back.labels, shapes.labels));
  EXPECT_EQ(back.labels[11].item<int64_t>(), 1);  // class i % 10
  EXPECT_THROW(
      write_cifar10_batch(root_ / "x.bin", {shapes.images.narrow(2, 0, 16), shapes.labels}),
      InputError);
}

TEST_F(ClassifyDataTest, Cifar10RecordsDecodeToKnownPixelsAndLabels) {
  write(root_ / "data_batch_1.bin", cifar_record(3) + cifar_record(7));
  write(root_ / "test_batch.bin", cifar_record(9));
  auto d = read_cifar10_batches({root_ / "data_batch_1.bin"});
  ASSERT_EQ(d.images.sizes(), torch::IntArrayRef({2, 3, 32, 32}));
  EXPECT_EQ(d.labels[0].item<int64_t>(), 3);
  EXPECT_EQ(d.labels[1].item<int64_t>(), 7);
  EXPECT_EQ(d.images[1][2][5][6].item<uint8_t>(), (100 + 5 + 6 + 7) % 256);  // blue plane
  EXPECT_EQ(d.images[0][0][31][31].item<uint8_t>(), (62 + 3) % 256);

  EXPECT_EQ(detect_classify_dataset(root_.string()), "cifar10");
  ClassifyDataOptions o;
  o.augment = false;
  auto data = load_classify_data(root_.string(), o);
  EXPECT_EQ(data.dataset, "cifar10");
  EXPECT_EQ(data.train->size(), 2);
  EXPECT_EQ(data.val->size(), 1);
  auto ex = data.val->get(0, 0);
  EXPECT_EQ(ex.target.item<int64_t>(), 9);
  // Normalised with the CIFAR-10 mean and std: pixel (0,0) of red is 9/255.
  EXPECT_NEAR(ex.input[0][0][0].item<float>(), (9 / 255.0 - 0.4914) / 0.2470, 1e-5);
}

TEST_F(ClassifyDataTest, Cifar10TruncatedAndMislabeledFilesAreErrors) {
  write(root_ / "data_batch_1.bin", cifar_record(1).substr(0, 3000));
  try {
    read_cifar10_batches({root_ / "data_batch_1.bin"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("data_batch_1.bin is truncated"), std::string::npos)
        << e.what();
  }
  write(root_ / "data_batch_1.bin", cifar_record(1) + cifar_record(12));
  try {
    read_cifar10_batches({root_ / "data_batch_1.bin"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("record 1 has label 12"), std::string::npos) << e.what();
  }
}

TEST_F(ClassifyDataTest, MnistIdxRoundTripAndErrors) {
  write_mnist("train", 12, 12);
  write_mnist("t10k", 5, 5);
  auto d = read_mnist(root_ / "train-images-idx3-ubyte", root_ / "train-labels-idx1-ubyte");
  ASSERT_EQ(d.images.sizes(), torch::IntArrayRef({12, 1, 28, 28}));
  EXPECT_EQ(d.labels[11].item<int64_t>(), 1);
  EXPECT_EQ(d.images[2][0][1][3].item<uint8_t>(), (28 + 3 + 6) % 256);
  EXPECT_EQ(detect_classify_dataset(root_.string()), "mnist");
  ClassifyDataOptions o;
  o.input_shape = {1, 1, 28, 28};
  auto data = load_classify_data(root_.string(), o);
  EXPECT_EQ(data.val->size(), 5);
  EXPECT_EQ(data.val->get(0, 0).input.sizes(), torch::IntArrayRef({1, 28, 28}));
  // A three-channel model gets the grey image replicated.
  o.input_shape = {1, 3, 32, 32};
  EXPECT_EQ(load_classify_data(root_.string(), o).val->get(0, 0).input.sizes(),
            torch::IntArrayRef({3, 32, 32}));

  write_mnist("train", 12, 11);
  EXPECT_THROW(read_mnist(root_ / "train-images-idx3-ubyte", root_ / "train-labels-idx1-ubyte"),
               InputError);
  write_mnist("train", 12, 12, 2050);
  try {
    read_mnist(root_ / "train-images-idx3-ubyte", root_ / "train-labels-idx1-ubyte");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("magic 2051"), std::string::npos);
  }
  write_mnist("train", 12, 12);
  fs::resize_file(root_ / "train-images-idx3-ubyte", 16 + 28 * 28 * 3);
  EXPECT_THROW(read_mnist(root_ / "train-images-idx3-ubyte", root_ / "train-labels-idx1-ubyte"),
               InputError);
}

TEST_F(ClassifyDataTest, MnistHeadersThatWouldOverflowAreRefused) {
  // Sizes from a fuzzer's reproducer: n · rows · cols overflowed int64 before the check.
  const auto images = root_ / "train-images-idx3-ubyte", labels = root_ / "train-labels-idx1-ubyte";
  auto write = [&](uint32_t n, uint32_t rows, uint32_t cols) {
    std::ofstream(images, std::ios::binary)
        << be32(2051) << be32(n) << be32(rows) << be32(cols) << std::string(64, '\1');
    std::ofstream(labels, std::ios::binary) << be32(2049) << be32(n) << std::string(8, '\1');
  };
  auto message = [&] {
    try {
      read_mnist(images, labels);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  write(3370306790u, 2049u, 1011241050u);
  EXPECT_EQ(message(), "MNIST file " + images.string() +
                           ": header says images of 2049x1011241050, not 1..65536 pixels a side");
  write(4000000000u, 65536u, 65536u);
  EXPECT_EQ(message(), "MNIST file " + images.string() +
                           " is truncated: header says 4000000000 images of 65536x65536");
  write(2, 0, 28);
  EXPECT_NE(message().find("images of 0x28"), std::string::npos);
}

TEST_F(ClassifyDataTest, ImageFolderClassesAreSortedSubfolders) {
  for (const char* split : {"train", "val"})
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 2; ++i)
        write_image(root_ / split / ("class_" + std::string(1, static_cast<char>('c' - c))) /
                        (std::to_string(i) + ".png"),
                    torch::full({3, 40, 50}, 0.1f * c));
  EXPECT_EQ(detect_classify_dataset(root_.string()), "imagefolder");
  ClassifyDataOptions o;
  o.augment = false;
  auto d = load_classify_data(root_.string(), o);
  EXPECT_EQ(d.classes, (std::vector<std::string>{"class_a", "class_b", "class_c"}));
  EXPECT_EQ(d.train->size(), 6);
  auto ex = d.val->get(0, 0);
  EXPECT_EQ(ex.target.item<int64_t>(), 0);
  EXPECT_EQ(ex.input.sizes(), torch::IntArrayRef({3, 32, 32}));
  // class_a holds the brightest images (c = 2 wrote 'a').
  EXPECT_NEAR(ex.input[0][5][5].item<float>(), (std::round(0.2 * 255) / 255 - 0.485) / 0.229, 1e-4);
}

TEST_F(ClassifyDataTest, UnrecognisedFoldersAreErrors) {
  std::ofstream(root_ / "notes.txt") << "x";
  try {
    detect_classify_dataset(root_.string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a recognised dataset"), std::string::npos);
  }
  EXPECT_THROW(detect_classify_dataset((root_ / "missing").string()), InputError);
}

TEST(SyntheticShapes, DeterministicBalancedAndDistinct) {
  auto a = render_synthetic_shape(3, 32, 77), b = render_synthetic_shape(3, 32, 77);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_EQ(a.sizes(), torch::IntArrayRef({3, 32, 32}));
  EXPECT_EQ(a.scalar_type(), torch::kUInt8);
  EXPECT_FALSE(torch::equal(a, render_synthetic_shape(4, 32, 77)));
  EXPECT_EQ(synthetic_shape_classes().size(), 10u);
  ClassifyDataOptions o;
  o.synthetic_train = 50;
  o.synthetic_val = 20;
  auto d = load_classify_data("synthetic", o);
  std::set<int64_t> labels;
  for (int64_t i = 0; i < d.val->size(); ++i)
    labels.insert(d.val->get(i, 0).target.item<int64_t>());
  EXPECT_EQ(labels.size(), 10u);
  // Augmentation changes training examples between epochs but not validation ones.
  EXPECT_FALSE(torch::equal(d.train->get(3, 0).input, d.train->get(3, 1).input));
  EXPECT_TRUE(torch::equal(d.val->get(3, 0).input, d.val->get(3, 1).input));
}

}  // namespace igb::data
