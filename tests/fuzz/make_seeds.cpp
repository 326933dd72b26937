// Writes the binary seed inputs of the fuzz targets into FOLDER/<target>/: checkpoints of a tiny
// model (with and without optimizer state), CIFAR-10 records, an MNIST pair (in mnist_fuzz's
// layout) and small images. Usage: igb_fuzz_make_seeds FOLDER
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "data/image.h"
#include "tests/checkpoint_forge.h"
#include "tiny_net.h"

namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: igb_fuzz_make_seeds FOLDER\n";
    return 2;
  }
  const fs::path root = argv[1];
  torch::manual_seed(0);

  // Checkpoints: model only, and model + optimizer state after one step.
  igb::fuzz::TinyNet net;
  igb::CheckpointMeta meta;
  meta.optform = "sr";
  meta.model = "tiny";
  meta.epoch = 0;
  meta.best_metric_name = "psnr";
  meta.best_metric = 20.5;
  meta.best_epoch = 0;
  fs::create_directories(root / "checkpoint");
  igb::CheckpointParts parts;
  parts.model = &net;
  igb::save_checkpoint(root / "checkpoint" / "model_only.ckpt", meta, parts);
  torch::optim::SGD sgd(net.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  net.conv->forward(torch::rand({1, 1, 4, 4})).sum().backward();
  sgd.step();
  parts.optimizer = &sgd;
  meta.epoch = 1;
  igb::save_checkpoint(root / "checkpoint" / "with_optimizer.ckpt", meta, parts);
  // Forged ones: records damaged under recomputed checksums, as a file crafted to be trusted would
  // be (the loader must refuse each in one line, before LibTorch reads a tensor).
  const auto source = root / "checkpoint" / "with_optimizer.ckpt";
  auto forge = [&](const std::string& name,
                   const std::function<void(const std::string&, std::string&, bool&)>& edit) {
    igb::test::forge_checkpoint(source, root / "checkpoint" / ("forged_" + name + ".ckpt"), edit);
  };
  for (size_t keep : {0, 4, 100}) {
    bool done = false;
    forge("short" + std::to_string(keep), [&](const std::string& n, std::string& b, bool&) {
      if (!done && n.rfind("data/", 0) == 0 && b.size() > keep) {
        b.resize(keep);
        done = true;
      }
    });
  }
  forge("no_data", [](const std::string& n, std::string&, bool& keep) { keep = n != "data/0"; });
  forge("cut_pickle", [](const std::string& n, std::string& b, bool&) {
    if (n == "data.pkl") b.resize(b.size() / 2);
  });
  forge("code", [](const std::string& n, std::string& b, bool&) {
    if (n.rfind("code/", 0) == 0)
      b += "\n  def __setstate__(self, state: str) -> None:\n    pass\n";
  });

  // CIFAR-10: two records of label + 3072 pixels.
  std::vector<uint8_t> cifar;
  for (int r = 0; r < 2; ++r) {
    cifar.push_back(static_cast<uint8_t>(r * 7));
    for (int i = 0; i < 3072; ++i) cifar.push_back(static_cast<uint8_t>(i * (r + 3)));
  }
  write(root / "cifar" / "two_records.bin", cifar);

  // MNIST: 2-byte little-endian length of the images file, the images file, the labels file.
  std::vector<uint8_t> images, labels;
  put_be32(images, 2051);
  put_be32(images, 2);
  put_be32(images, 4);
  put_be32(images, 3);
  for (int i = 0; i < 2 * 4 * 3; ++i) images.push_back(static_cast<uint8_t>(i * 10));
  put_be32(labels, 2049);
  put_be32(labels, 2);
  labels.push_back(3);
  labels.push_back(9);
  std::vector<uint8_t> mnist = {static_cast<uint8_t>(images.size() & 0xff),
                                static_cast<uint8_t>(images.size() >> 8)};
  mnist.insert(mnist.end(), images.begin(), images.end());
  mnist.insert(mnist.end(), labels.begin(), labels.end());
  write(root / "mnist" / "pair.bin", mnist);

  // Images: small PNG, JPEG and BMP (read_image decodes by content, not by name).
  fs::create_directories(root / "image");
  const auto rgb = torch::rand({3, 6, 5});
  for (const char* ext : {"png", "jpg", "bmp"})
    igb::data::write_image(root / "image" / (std::string("small.") + ext), rgb);
  std::cout << "seeds written to " << root.string() << "\n";
  return 0;
}
