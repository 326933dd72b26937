// igb-tools make-cifar: the seeded synthetic shapes written as CIFAR-10 binaries, so that the
// CIFAR-10 reader, and any other tool that reads that format, can be run on data made here.
#include <CLI/CLI.hpp>

#include <iostream>

#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "data/classify_data.h"
#include "data/synthetic_shapes.h"
#include "options/tool_commands/tool_command.h"

namespace igb::options {

namespace {

namespace fs = std::filesystem;

class MakeCifarCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    sub.add_option("--out", out_, "Folder for data_batch_1.bin … data_batch_5.bin, test_batch.bin")
        ->required();
    int_range(sub.add_option("--train", train_, "Training images (split over 5 batch files)")
                  ->capture_default_str(),
              5, 1000000);
    int_range(sub.add_option("--test", test_, "Test images")->capture_default_str(), 1, 1000000);
  }
  void check_outputs() const override { check_output_folder("--out", out_); }
  int run() override {
    fs::create_directories(out_);
    // The training and validation images of --data synthetic, the same seeds.
    const auto train = data::synthetic_shape_images(train_, 32, 10'000'000);
    const int64_t per = (train_ + 4) / 5;
    for (int64_t b = 0; b < 5; ++b) {
      const int64_t from = b * per, n = std::min(per, train_ - from);
      if (n <= 0) break;
      data::write_cifar10_batch(fs::path(out_) / ("data_batch_" + std::to_string(b + 1) + ".bin"),
                                {train.images.narrow(0, from, n), train.labels.narrow(0, from, n)});
    }
    data::write_cifar10_batch(fs::path(out_) / "test_batch.bin",
                              data::synthetic_shape_images(test_, 32, 20'000'000));
    std::string names;
    for (const auto& c : data::synthetic_shape_classes()) names += c + "\n";
    write_text_atomically(fs::path(out_) / "batches.meta.txt", names);
    std::cout << "wrote " << train_ << " training and " << test_
              << " test images of the synthetic shapes as CIFAR-10 binaries to " << out_ << "\n";
    return kExitOk;
  }

 private:
  std::string out_;
  int64_t train_ = 50000, test_ = 10000;
};

}  // namespace

void add_make_cifar_command(Registry<ToolCommandSpec>& r) {
  r.add("make-cifar", {[] { return std::make_unique<MakeCifarCommand>(); }},
        "Write the synthetic shapes as CIFAR-10 binaries (data_batch_1..5.bin, test_batch.bin)");
}

}  // namespace igb::options
