// igb-tools run: the model (eval, no grad) on a float32 .npy tensor, its output written as .npy
// and, with --compare, checked against another runtime's output.
#include <CLI/CLI.hpp>

#include <iostream>

#include "core/cli.h"
#include "core/error.h"
#include "core/npy.h"
#include "options/common_options.h"
#include "options/inference_runtime.h"
#include "options/tool_commands/tool_command.h"

namespace igb::options {

namespace {

class RunCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    sub.add_option("--model", args_.model,
                   "A model of the zoo (igb-tools list models), torchscript:PATH or onnx:PATH, a "
                   "TorchScript or ONNX file (docs/byo-model.md, docs/onnx-import.md)");
    sub.add_option("--model-arg", args_.options,
                   "Model option KEY=VALUE (repeatable), e.g. scale=3");
    sub.add_option("--checkpoint", args_.checkpoint,
                   "A checkpoint (.ckpt); the model is rebuilt from it");
    sub.add_option("--input", args_.input,
                   "Input tensor: a float32 .npy file of the model's rank and channel count")
        ->required();
    sub.add_option("--output", args_.output, "Output .npy file to write (float32)")->required();
    add_threads_option(sub, threads_);
    sub.add_option("--random-input", args_.random_input,
                   "Instead of reading --input, write there uniform [0, 1) values of this shape "
                   "(NxCxHxW) drawn with --seed, then run on them");
    sub.add_option("--seed", args_.seed,
                   "Seed of --random-input and of a --model's initial weights (every command "
                   "given the same model and seed holds the same weights)")
        ->capture_default_str();
    sub.add_option(
        "--compare", args_.compare,
        "Compare the output with this .npy (another runtime's output of the same input): "
        "print the largest difference, exit 1 when above --tolerance");
    real_range(sub.add_option("--tolerance", args_.tolerance,
                              "Largest |output - compare| allowed, as a fraction of max |output|")
                   ->capture_default_str(),
               0, 1);
    sub.add_option("--device", args_.device, "cpu, cuda or cuda:N")
        ->capture_default_str()
        ->check(CLI::IsMember({"cpu", "cuda"}));
    add_runtime_option(sub, args_.runtime);
    add_int8_engine_option(sub, args_.int8_engine);
  }
  void check_outputs() const override {
    check_output_file("--output", args_.output);
    if (!args_.random_input.empty()) check_output_file("--input", args_.input);
  }
  int run() override {
    const c10::Device device = configure_runtime(threads_, args_.device);
    auto m = load_tool_model(args_.model, args_.options, args_.checkpoint, "", args_.seed);
    if (!args_.random_input.empty()) {
      const auto s = graph::parse_shape(args_.random_input, "--random-input");
      check_input_fits(s, args_.random_input);
      torch::manual_seed(static_cast<uint64_t>(args_.seed));
      write_npy(args_.input, torch::rand(s));
    }
    const at::Tensor x = read_npy(args_.input);
    const auto own = m.model->input_shape();
    const graph::Shape shape = x.sizes().vec();
    const std::string where = args_.input + ": ";
    if (shape.size() != own.size())
      throw InputError(where + "a " + std::to_string(shape.size()) + "-D tensor (shape " +
                       graph::shape_to_string(shape) + "), but " + m.name + " takes " +
                       std::to_string(own.size()) + "-D input like " + graph::shape_to_string(own));
    if (own.size() >= 2 && shape[1] != own[1])
      throw InputError(where + std::to_string(shape[1]) + " channels (shape " +
                       graph::shape_to_string(shape) + "), but " + m.name + " takes " +
                       std::to_string(own[1]) + "-channel input like " +
                       graph::shape_to_string(own));
    if (x.numel() == 0)
      throw InputError(where + "an empty tensor " + graph::shape_to_string(shape));
    m.model->eval();
    m.model->to(device);
    at::Tensor y;
    std::string runtime;
    try {
      torch::NoGradGuard no_grad;
      y = inference_forward(m.model, m.name, args_.runtime, &runtime,
                            args_.int8_engine)(x.to(device));
    } catch (const c10::Error& e) {
      // A spatial size the model cannot take (a classifier's fixed flatten) fails inside LibTorch.
      std::string why = e.what_without_backtrace();
      why = why.substr(0, why.find('\n'));
      throw InputError(where + "shape " + graph::shape_to_string(shape) + " does not fit " +
                       m.name + ": " + why);
    }
    write_npy(args_.output, y);
    std::cout << "wrote " << args_.output << ": " << m.name << " " << graph::shape_to_string(shape)
              << " -> " << graph::shape_to_string(y.sizes().vec()) << " (" << runtime << ")\n";
    if (args_.compare.empty()) return kExitOk;
    const at::Tensor ref = read_npy(args_.compare);
    const at::Tensor out = y.to(torch::kCPU, torch::kFloat);
    if (ref.sizes() != out.sizes())
      throw InputError(args_.compare + ": shape " + graph::shape_to_string(ref.sizes().vec()) +
                       ", but the output is " + graph::shape_to_string(out.sizes().vec()));
    const double diff = (out - ref).abs().max().item<double>();
    const double scale = out.abs().max().item<double>();
    const bool ok = diff <= args_.tolerance * scale;
    std::cout << "max |output - " << args_.compare << "| = " << diff << " (max |output| = " << scale
              << "): " << (ok ? "within " : "above ") << args_.tolerance << " of max |output|\n";
    return ok ? kExitOk : kExitFailure;
  }

 private:
  struct Args {
    std::string model, checkpoint, input, output, device = "cpu", random_input, compare,
                                                  runtime = "inference", int8_engine = "auto";
    std::vector<std::string> options;
    int64_t seed = 0;
    double tolerance = 1e-4;
  } args_;
  int64_t threads_ = 0;
};

}  // namespace

void add_run_command(Registry<ToolCommandSpec>& r) {
  r.add("run", {[] { return std::make_unique<RunCommand>(); }},
        "Run the model (eval, no grad) on a float32 .npy tensor; write its output as .npy");
}

}  // namespace igb::options
