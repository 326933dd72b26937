#include "options/common_options.h"

#include <CLI/CLI.hpp>
#include <opencv2/core/utility.hpp>

#include <limits>
#include <thread>

#include "core/cli.h"
#include "core/error.h"
#include "core/host.h"
#include "options/inference_runtime.h"
#include "options/tool_commands/tool_model.h"

namespace igb::options {

namespace {

constexpr double kNoMax = std::numeric_limits<double>::infinity();
constexpr int64_t kNoIntMax = std::numeric_limits<int64_t>::max();

/// What is trained and how: model, data, epochs, batches, learning rate and optimizer.
void add_training_options(CLI::App& app, models::TrainConfig& c) {
  app.add_option("--model", c.model,
                 "Model registry name (igb-tools list models), torchscript:PATH or onnx:PATH, a "
                 "TorchScript or ONNX file (docs/byo-model.md, docs/onnx-import.md)")
      ->capture_default_str();
  app.add_option("--data", c.data,
                 "A dataset (igb-tools list datasets: synthetic, photos, digits, ...) or a data "
                 "folder")
      ->capture_default_str();
  int_range(app.add_option("--epochs", c.epochs,
                           "Total epochs (numbered from 0; a resumed run continues to this)")
                ->capture_default_str(),
            1, 1000000);
  int_range(
      app.add_option("--batch-size", c.batch_size, "Examples per minibatch")->capture_default_str(),
      1, 65536);
  real_range(app.add_option("--lr", c.lr, "Learning rate")->capture_default_str(), 0, kNoMax,
             /*min_excluded=*/true);
  app.add_option("--lr-decay", c.lr_decay,
                 "Learning-rate decay over the epochs (cosine: down to lr/100)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "cosine"}));
  int_range(app.add_option("--lr-warmup", c.lr_warmup,
                           "Epochs of linear learning-rate warm-up: epoch e < N trains at "
                           "lr*(e+1)/N, then --lr-decay's rate (0 = none)")
                ->capture_default_str(),
            0, kNoIntMax);
  app.add_option("--optimizer", c.optimizer, "Optimizer")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam"}));
  real_range(app.add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str(), 0, 1);
  real_range(
      app.add_option("--weight-decay", c.weight_decay, "L2 weight decay")->capture_default_str(), 0,
      kNoMax);
}

/// Where and how it runs: threads, device, run directory, resume, schedule, precision, processes.
void add_run_options(CLI::App& app, models::TrainConfig& c) {
  int_range(app.add_option("--threads", c.threads, "Intra-op threads (0 = all cores)")
                ->capture_default_str(),
            0, 1024);
  int_range(app.add_option("--workers", c.workers,
                           "Data-loading threads (0 = load on the training thread)")
                ->capture_default_str(),
            0, 64);
  int_range(app.add_option("--seed", c.seed, "Seed of weights, data order and augmentation")
                ->capture_default_str(),
            0, kNoIntMax);
  app.add_option("--device", c.device, "cpu, cuda or cuda:N")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--out", c.out, "Run directory (default runs/<model>___<YYYY.MM.DD-HHMMSS>)");
  app.add_flag("--overwrite", c.overwrite,
               "Start a fresh run in an --out folder that holds a run, replacing its checkpoints "
               "and logs (without it such a folder is refused)")
      ->default_str("false");
  app.add_option("--resume", c.resume,
                 "Checkpoint to continue from (its next epoch; --epochs is the total)");
  app.add_option("--compress", c.compress,
                 "Compression schedule (Distiller YAML); on resume, the checkpoint's by default");
  add_int8_weights_option(app, c.int8_weights, "the schedule's quantizer trains")
      ->each([&c](const std::string& choice) {
        // auto narrows only where it pays: a class with unsigned activations, on this CPU.
        c.int8_weight_bits = int8_weight_bits(choice, /*unsigned_activations=*/true);
        c.int8_weights_unsigned_only = choice == "auto";
      });
  int_range(app.add_option("--max-batches", c.max_batches,
                           "Cap on minibatches per epoch, for smoke runs (0 = none)")
                ->capture_default_str(),
            0, kNoIntMax);
  int_range(app.add_option("--max-image-pixels", c.max_image_pixels,
                           "Largest image read, in pixels (width x height); a larger one is "
                           "refused from its header")
                ->capture_default_str(),
            1, kNoIntMax);
  app.add_flag("--amp", c.amp,
               "Mixed precision: bfloat16 autocast on CPU, float16 with dynamic loss scaling on "
               "CUDA; weights stay float32")
      ->default_str("false");
  int_range(app.add_option("--nproc", c.nproc,
                           "Data-parallel training in N processes on this machine, each with "
                           "--batch-size examples a step (docs/distributed.md)")
                ->capture_default_str(),
            1, 256);
  real_range(app.add_option("--dist-timeout", c.dist_timeout,
                            "Seconds a rank of a data-parallel job waits for the others before "
                            "it stops with an error")
                 ->capture_default_str(),
             1, 86400);
  int_range(app.add_option("--log-every", c.log_every,
                           "Progress log line every N minibatches when not on a terminal")
                ->capture_default_str(),
            0, kNoIntMax);
}

}  // namespace

void add_common_train_options(CLI::App& app, models::TrainConfig& c) {
  add_training_options(app, c);
  add_run_options(app, c);
}

c10::Device configure_runtime(int64_t threads, const std::string& device) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  torch::set_num_threads(static_cast<int>(threads));
  tune_allocator();
  // Data workers run their own threads; keep OpenCV from oversubscribing the cores.
  cv::setNumThreads(1);
  if (device == "cpu") return c10::Device(c10::DeviceType::CPU);
  // cuda, or cuda:N with N a device index.
  const std::string digits = device.size() > 5 ? device.substr(5) : "";
  const bool indexed = device.rfind("cuda:", 0) == 0 && !digits.empty() && digits.size() <= 4 &&
                       digits.find_first_not_of("0123456789") == std::string::npos;
  if (device != "cuda" && !indexed)
    throw InputError("--device must be cpu, cuda or cuda:N, not '" + device + "'");
  if (!torch::cuda::is_available())
    throw InputError("--device " + device + ": no CUDA device is available to this LibTorch build");
  const int index = indexed ? std::stoi(digits) : 0;
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (index >= count)
    throw InputError("--device " + device + ": this machine has " + std::to_string(count) +
                     " CUDA device" + (count == 1 ? "" : "s") +
                     " (cuda:0 to cuda:" + std::to_string(count - 1) + ")");
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
}

void add_common_test_options(CLI::App& app, TestArgs& a) {
  auto& r = a.request;
  app.add_option("--checkpoint", r.checkpoint, "Checkpoint (.ckpt) to test")->required();
  app.add_option("--summary", a.summary,
                 "After testing, write these reports into the output folder: sparsity, macs, "
                 "graph, profile, sensitivity (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember(summary_kinds()));
  r.data.data.clear();  // empty: evaluate_checkpoint picks the checkpoint's own dataset
  app.add_option("--data", r.data.data,
                 "A dataset (synthetic, photos, digits, ...) or a data folder (default: the "
                 "dataset the checkpoint was trained on, or synthetic when it was a folder)");
  int_range(app.add_option("--max-image-pixels", r.data.max_image_pixels,
                           "Largest image read, in pixels (width x height); a larger one is "
                           "refused from its header")
                ->capture_default_str(),
            1, std::numeric_limits<int64_t>::max());
  app.add_option("--out", r.out, "Folder for test_summary.json (default: the checkpoint's folder)");
  app.add_option("--device", a.device, "cpu, cuda or cuda:N")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  add_runtime_option(app, a.runtime);
  add_int8_engine_option(app, a.int8_engine);
  int_range(app.add_option("--threads", a.threads, "Intra-op threads (0 = all cores)")
                ->capture_default_str(),
            0, 1024);
  auto* qe = app.add_option("--quantize-eval", r.quantize_eval.schedule,
                            "Also evaluate the model post-training quantized by the "
                            "PostTrainLinearQuantizer of this Distiller YAML, next to FP32");
  int_range(app.add_option("--calibration-batches", r.quantize_eval.calibration_batches,
                           "Batches of the evaluation data the activation statistics are "
                           "collected on (classify: 128 images a batch; sr, deblur: one image)")
                ->capture_default_str()
                ->needs(qe),
            1, 1000000);
  add_int8_weights_option(app, a.int8_weights, "--quantize-eval writes")->needs(qe);
  app.add_option("--qe-stats-file", r.quantize_eval.stats_file,
                 "Activation statistics (YAML, as --quantize-eval writes to quant_stats.yaml) to "
                 "use instead of calibrating")
      ->needs(qe)
      ->check(CLI::ExistingFile);
  app.add_flag("--int8", a.int8,
               "Also run the quantized model's layers in integers (oneDNN's u8/s8 kernels on "
               "the grids training or --quantize-eval found) and score it next to the "
               "fake-quantized model; docs/int8.md");
  app.add_option("--onnx", a.onnx,
                 "Also evaluate this ONNX export of the checkpoint (igb-tools export-onnx) in "
                 "onnxruntime on the same data, next to the checkpoint (needs "
                 "scripts/install_onnxruntime.sh)")
      ->check(CLI::ExistingFile);
}

}  // namespace igb::options
