// igb-tools export-onnx: the model as ONNX (FP32, FP16 or TensorRT's INT8 Q/DQ), the files
// trtexec needs beside it, and with --check-layers the INT8 file against the model layer by layer
// in onnxruntime.
#include <CLI/CLI.hpp>

#include <iostream>

#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/table.h"
#include "deploy/onnx/onnx_export.h"
#include "deploy/onnx/onnx_layer_check.h"
#include "deploy/onnx/onnx_runtime.h"
#include "deploy/onnx/onnx_trt.h"
#include "models/family.h"
#include "options/common_options.h"
#include "options/tool_commands/tool_command.h"
#include "runtime/inference_model.h"

namespace igb::options {

namespace fs = std::filesystem;

namespace {

/// --calibrate's batches: the synthetic data of the model's family, at its traced input shape.
deploy::OnnxBatchSource synthetic_batches(const ToolModel& m, int64_t batches) {
  const auto inputs = models::family_of_model(m.name, *m.model).synthetic_inputs;
  const graph::Shape in = m.input;
  return [inputs, in, batches](const std::function<void(const at::Tensor&)>& f) {
    inputs(in, batches, f);
  };
}

class ExportOnnxCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    add_target_options(sub, target_, true);
    sub.add_option("--out", out_, "ONNX file to write (.onnx)")->required();
    sub.add_option("--opset", opset_, "ONNX opset (only 13)")->capture_default_str();
    sub.add_flag("--dynamic-batch", dynamic_batch_, "Declare the batch dim as the symbol N");
    sub.add_flag("--dynamic-hw", dynamic_hw_,
                 "Declare the input's height and width as the symbols H and W");
    auto* int8 = sub.add_flag(
        "--int8-qdq", int8_,
        "Explicit INT8: fake quantizations as QuantizeLinear/DequantizeLinear, quantized "
        "Conv/ConvTranspose/Gemm weights Q -> DQ per output channel, placed for TensorRT (int8, "
        "zero point 0) or with --qdq-placement cpu for onnxruntime's integer kernels; grids that "
        "do not fit int8 are reported");
    auto* fp16 = sub.add_flag(
        "--fp16", fp16_,
        "Initializers and computation in float16; the input and output stay float32 (a Cast after "
        "the input and before the output)");
    int8->excludes(fp16);
    auto* calibrate =
        sub.add_option("--calibrate", calibrate_,
                       "With --int8-qdq on a float model: activation ranges (amax, scale "
                       "amax/127) of every Conv/ConvTranspose/Gemm input and residual skip over "
                       "N batches of the model's optform's synthetic data (classify: 32 images a "
                       "batch; sr: one image); weights amax/127 per output channel")
            ->needs(int8);
    int_range(calibrate, 1, 100000);
    sub.add_option("--calibration-method", calibration_method_,
                   "max (largest |x|) or percentile (per-batch percentile of |x|, averaged)")
        ->capture_default_str()
        ->check(CLI::IsMember({"max", "percentile"}))
        ->needs(calibrate);
    sub.add_option("--percentile", percentile_, "Percentile of --calibration-method percentile")
        ->capture_default_str()
        ->check(CLI::Range(1e-9, 100.0))
        ->needs(calibrate);
    sub.add_option("--qdq-placement", placement_,
                   "With --int8-qdq: tensorrt (Q/DQ on layer inputs and weights, int8, for "
                   "TensorRT) or cpu (also on outputs and biases, BatchNorm folded, uint8 "
                   "activations: onnxruntime fuses them into QLinearConv/QLinearAdd and runs "
                   "them in integers; residual operands without a grid are calibrated, on 4 "
                   "batches unless --calibrate says otherwise; docs/export.md)")
        ->capture_default_str()
        ->check(CLI::IsMember({"tensorrt", "cpu"}))
        ->needs(int8);
    sub.add_option("--qdq-cpu", qdq_cpu_,
                   "With --qdq-placement cpu, the CPU whose onnxruntime kernels the file is exact "
                   "on: vnni (int8 weights: AVX-512 VNNI, AMX, ARM; on AVX2 only where no two "
                   "weights of a filter pass 16 bits, e.g. 7-bit weights), avx2 (uint8 weights "
                   "with zero point 128: every x86 CPU) or auto (this machine's; docs/int8.md)")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "vnni", "avx2"}));
    sub.add_flag("--check-layers", check_layers_,
                 "With --int8-qdq: run the written file in onnxruntime on one batch of the "
                 "optform's synthetic data and compare every fake-quantized layer with the "
                 "model's, each fed onnxruntime's values of the layers before it; prints a table, "
                 "writes F.layers.csv and F.layers.json, exit 1 when a layer has under 99.9% of "
                 "its values within one step (needs scripts/install_onnxruntime.sh)")
        ->needs(int8);
  }

  void check_outputs() const override {
    check_output_file("--out", out_);
    if (opset_ != 13)
      throw InputError("--opset " + std::to_string(opset_) +
                       ": the ONNX exporter writes opset 13 only");
  }

  int run() override {
    configure_runtime(target_.threads, "cpu");
    auto m = target_.load();
    const auto graph = tool_graph(m, m.input);
    if (check_layers_ &&
        std::none_of(graph.ops().begin(), graph.ops().end(), [](const graph::OpNode& op) {
          return op.op_kind == graph::OpKind::kFakeQuantize;
        }))
      throw InputError("--check-layers: " + m.name +
                       " has no fake quantization (train it under a quantization schedule); "
                       "there is no quantized layer to compare");
    std::shared_ptr<const deploy::OnnxCalibration> calibration;
    const bool cpu = placement_ == "cpu";
    if (int8_)
      deploy::check_qdq_placement(
          graph, cpu ? deploy::QdqPlacement::kCpu : deploy::QdqPlacement::kTensorRt);
    if (cpu && calibrate_ == 0) calibrate_ = 4;
    if (calibrate_ > 0)
      calibration = std::make_shared<deploy::OnnxCalibration>(deploy::calibrate_onnx(
          *m.model, graph, synthetic_batches(m, calibrate_), calibration_method_, percentile_));
    const auto r = deploy::export_onnx(
        *m.model, graph,
        deploy::OnnxExportOptions()
            .opset(opset_)
            .dynamic_batch(dynamic_batch_)
            .dynamic_hw(dynamic_hw_)
            .precision(int8_   ? deploy::OnnxPrecision::kInt8
                       : fp16_ ? deploy::OnnxPrecision::kFp16
                               : deploy::OnnxPrecision::kFp32)
            .calibration(calibration)
            .qdq_placement(cpu ? deploy::QdqPlacement::kCpu : deploy::QdqPlacement::kTensorRt)
            .qdq_cpu_weights(uint8_weights() ? deploy::QdqCpuWeights::kUint8
                                             : deploy::QdqCpuWeights::kInt8),
        out_);
    std::cout << "wrote " << r.path.string() << ": " << m.name << ", opset " << r.opset << ", "
              << r.nodes << " nodes, " << r.initializers << " initializers (from "
              << graph.ops().size() << " ops)\n";
    for (const auto& io : r.inputs) std::cout << "  input  " << deploy::onnx_io_string(io) << "\n";
    for (const auto& io : r.outputs) std::cout << "  output " << deploy::onnx_io_string(io) << "\n";
    std::cout << "  precision " << r.precision;
    if (calibration)
      std::cout << " (calibrated: " << calibration_method_ << " over " << calibration->batches
                << " batches)";
    if (r.precision == "int8")
      std::cout << ", " << r.activation_scales.size() << " activation and "
                << r.weight_scales.size() << " weight Q/DQ pairs placed for " << placement_;
    std::cout << "\n";
    if (!r.exact_on.empty()) std::cout << "  exact on " << r.exact_on << "\n";
    for (const auto& line : r.lines) std::cout << "  note: " << line << "\n";
    if (cpu) return check_layers_ ? check_layers(m, graph, r) : kExitOk;
    const auto trt = deploy::write_trt_files(r, {m.input});
    std::cout << "wrote " << trt.script.string() << " and " << trt.json.string() << "\n";
    return check_layers_ ? check_layers(m, graph, r) : kExitOk;
  }

 private:
  /// --check-layers: the written INT8 file against the model, layer by layer.
  int check_layers(ToolModel& m, const graph::SummaryGraph& graph,
                   const deploy::OnnxExportReport& r) {
    at::Tensor x;
    synthetic_batches(m, 1)([&](const at::Tensor& batch) { x = batch; });
    // A file with a fixed batch takes the traced one: the first images, or seeded noise when the
    // data has fewer.
    if (!dynamic_batch_ && x.size(0) != m.input[0]) {
      if (x.size(0) > m.input[0]) {
        x = x.narrow(0, 0, m.input[0]);
      } else {
        torch::manual_seed(0);
        x = torch::rand(m.input);
      }
    }
    TempDir scratch("igb-onnx-check");
    const auto check =
        deploy::check_qdq_layers(*m.model, graph, r, x, scratch.path(),
                                 deploy::OnnxRuntimeOptions().threads(target_.threads));
    Table t;
    t.columns = {"Layer", "Scale", "Elements", "Same value", "Within 1 step", "Max steps"};
    nlohmann::json layers = nlohmann::json::array();
    bool ok = true;
    for (const auto& l : check.layers) {
      ok = ok && l.within_one_step >= 0.999;
      t.rows.push_back({l.layer, fixed(l.scale, 6), std::to_string(l.elements), fixed(l.exact, 5),
                        fixed(l.within_one_step, 5), fixed(l.max_steps, 2)});
      layers.push_back({{"layer", l.layer},
                        {"onnx_value", l.onnx_name},
                        {"scale", l.scale},
                        {"elements", l.elements},
                        {"same_value", l.exact},
                        {"within_one_step", l.within_one_step},
                        {"max_steps", l.max_steps}});
    }
    write_text_atomically(fs::path(r.path).replace_extension(".layers.csv"), t.to_csv());
    const nlohmann::json j = {{"model", m.name},
                              {"onnx", r.path.string()},
                              {"input_shape", x.sizes().vec()},
                              {"layers", layers},
                              {"output_max_abs_diff", check.output_max_abs},
                              {"output_max_abs", check.output_max}};
    write_text_atomically(fs::path(r.path).replace_extension(".layers.json"), j.dump(2) + "\n");
    std::cout << "\nLayer by layer in onnxruntime, input "
              << graph::shape_to_string(x.sizes().vec())
              << " (each layer fed onnxruntime's values of the layers before it):\n"
              << t.to_text() << "output from onnxruntime's layers: max |ours - onnxruntime| = "
              << check.output_max_abs << " (max |y| = " << check.output_max << ")\n";
    if (!ok) {
      std::cout << "a layer has under 99.9% of its values within one step of onnxruntime's\n";
      return 1;
    }
    return kExitOk;
  }

  ToolTarget target_;
  std::string out_;
  int64_t opset_ = 13;
  bool dynamic_batch_ = false, dynamic_hw_ = false;
  bool int8_ = false, fp16_ = false, check_layers_ = false;
  std::string placement_ = "tensorrt";
  std::string qdq_cpu_ = "auto";

  /// --qdq-cpu: uint8 weights for a CPU whose u8×s8 pairs saturate (auto: this machine's).
  bool uint8_weights() const {
    return qdq_cpu_ == "avx2" || (qdq_cpu_ == "auto" && runtime::int8_isa().pairs_saturate);
  }
  int64_t calibrate_ = 0;
  std::string calibration_method_ = "max";
  double percentile_ = 99.99;
};

}  // namespace

void add_export_onnx_command(Registry<ToolCommandSpec>& r) {
  r.add("export-onnx", {[] { return std::make_unique<ExportOnnxCommand>(); }},
        "Export the model as an ONNX model (FP32, FP16 or INT8 Q/DQ)");
}

}  // namespace igb::options
