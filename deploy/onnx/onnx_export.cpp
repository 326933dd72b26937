#include "deploy/onnx/onnx_export.h"

#include <fstream>

#include "core/error.h"
#include "core/fs.h"
#include "deploy/onnx/onnx_ops.h"
#include "deploy/onnx/onnx_qdq_cpu.h"
#include "deploy/onnx/onnx_writer.h"
#include "graph/op_table.h"

namespace igb::deploy {

namespace {

/// What a Q/DQ pass placed (`placement`: "tensorrt" or "cpu"), into the export's report.
void add_qdq_record(const OnnxQdqRecord& record, const std::string& placement,
                    OnnxExportReport& r) {
  r.qdq_placement = placement;
  r.activation_scales = record.activation_scales;
  r.weight_scales = record.weight_scales;
  r.quantized_values = record.quantized_values;
  r.lines = record.lines;
  r.exact_on = record.exact_on;
}

/// Writes the ops `only` of `graph` (all when null) with the model's inputs and outputs, or with
/// `io` (inputs, outputs) when given; into `*bytes` instead of the file `out` when `bytes` is set.
OnnxExportReport write_onnx(torch::nn::Module& model, const SummaryGraph& graph,
                            const OnnxExportOptions& options, const std::filesystem::path& out,
                            const std::vector<int>* only,
                            const std::pair<std::vector<int>, std::vector<int>>* io,
                            std::string* bytes_out = nullptr) {
  if (options.opset() != 13)
    throw InputError("ONNX opset " + std::to_string(options.opset()) +
                     " is not supported; the exporter writes opset 13");
  std::vector<const OpNode*> ops;
  if (only)
    for (int i : *only) ops.push_back(&graph.op(i));
  else
    for (const auto& op : graph.ops()) ops.push_back(&op);
  // Every op must have an emitter before anything is built.
  const bool int8 = options.precision() == OnnxPrecision::kInt8;
  if (options.calibration() && !int8)
    throw InputError("a calibration applies to the INT8 Q/DQ export only");
  if (int8 && io) throw InputError("stages are exported in FP32 or FP16, not INT8 Q/DQ");
  if (int8) check_qdq_placement(graph, options.qdq_placement());
  for (const OpNode* op : ops) {
    if (int8 && op->op_kind == OpKind::kFakeQuantize) continue;
    if (op->op_kind == OpKind::kOther || !onnx_mapping(op->op_kind).emit)
      throw InputError("cannot export " + op->type + " op '" + op->name + "' of " +
                       graph.model_name() + " to ONNX: the exporter has no mapping for " +
                       (op->op_kind == OpKind::kOther ? op->kind : std::string(op->type)));
  }
  OnnxWriter writer(model, graph, {options.dynamic_batch(), options.dynamic_hw()});
  if (io) writer.set_io(io->first, io->second);
  writer.set_fp16(options.precision() == OnnxPrecision::kFp16);
  std::unique_ptr<OnnxQdqPass> qdq;
  std::unique_ptr<OnnxCpuQdqPass> cpu;
  if (int8 && options.qdq_placement() == QdqPlacement::kCpu)
    cpu = std::make_unique<OnnxCpuQdqPass>(writer, graph, options.calibration().get(),
                                           options.qdq_cpu_weights() == QdqCpuWeights::kUint8);
  else if (int8)
    qdq = std::make_unique<OnnxQdqPass>(writer, graph, options.calibration().get());
  for (const OpNode* op : ops) {
    if (cpu && cpu->emit(*op)) continue;
    if (cpu) {
      onnx_mapping(op->op_kind).emit(writer, *op);
      continue;
    }
    if (qdq) qdq->before(*op);
    if (qdq && op->op_kind == OpKind::kFakeQuantize)
      qdq->emit_fake_quantize(*op);
    else
      onnx_mapping(op->op_kind).emit(writer, *op);
  }
  const std::string version =
      options.producer_version().empty() ? IGB_VERSION : options.producer_version();
  std::string bytes = writer.finish(options.opset(), options.producer_name(), version);
  OnnxExportReport r;
  if (bytes_out) {
    *bytes_out = std::move(bytes);
  } else {
    write_atomically(out,
                     [&](const std::filesystem::path& tmp) { write_file_bytes(tmp, bytes, out); });
    r.path = out;
  }
  r.opset = options.opset();
  r.nodes = writer.node_count();
  r.initializers = writer.initializer_count();
  for (const auto& i : writer.inputs()) r.inputs.push_back({i.name, i.dims});
  for (const auto& o : writer.outputs()) r.outputs.push_back({o.name, o.dims});
  r.precision = onnx_precision_name(options.precision());
  if (cpu) {
    cpu->finish();
    add_qdq_record(cpu->record(), "cpu", r);
  }
  if (qdq) {
    add_qdq_record(qdq->record(), "tensorrt", r);
    if (r.activation_scales.empty() && r.weight_scales.empty())
      r.lines.push_back(
          "no layer has a quantized input and weight, so no Q/DQ pair was written: TensorRT runs "
          "the model in float (--calibrate N gives float inputs activation ranges)");
  }
  return r;
}

}  // namespace

void check_qdq_placement(const SummaryGraph& graph, QdqPlacement placement) {
  if (placement != QdqPlacement::kCpu) return;
  for (const auto& op : graph.ops())
    if (op.op_kind == OpKind::kFakeQuantize) return;
  throw InputError("--qdq-placement cpu writes a quantized model's own grids, and " +
                   graph.model_name() +
                   " has none (a float model): quantize it first (a QAT schedule, or igb-test "
                   "--quantize-eval), or calibrate it for --qdq-placement tensorrt");
}

OnnxExportReport export_onnx(torch::nn::Module& model, const SummaryGraph& graph,
                             const OnnxExportOptions& options, const std::filesystem::path& out) {
  return write_onnx(model, graph, options, out, nullptr, nullptr);
}

OnnxExportReport export_onnx_ops(torch::nn::Module& model, const SummaryGraph& graph,
                                 const std::vector<int>& ops, const std::vector<int>& inputs,
                                 const std::vector<int>& outputs, const OnnxExportOptions& options,
                                 const std::filesystem::path& out) {
  const std::pair<std::vector<int>, std::vector<int>> io{inputs, outputs};
  return write_onnx(model, graph, options, out, &ops, &io);
}

std::string onnx_model_bytes(torch::nn::Module& model, const SummaryGraph& graph,
                             const OnnxExportOptions& options) {
  std::string bytes;
  write_onnx(model, graph, options, {}, nullptr, nullptr, &bytes);
  return bytes;
}

std::string onnx_ops_bytes(torch::nn::Module& model, const SummaryGraph& graph,
                           const std::vector<int>& ops, const std::vector<int>& inputs,
                           const std::vector<int>& outputs, const OnnxExportOptions& options) {
  const std::pair<std::vector<int>, std::vector<int>> io{inputs, outputs};
  std::string bytes;
  write_onnx(model, graph, options, {}, &ops, &io, &bytes);
  return bytes;
}

std::string onnx_value_name(const SummaryGraph& graph, int value) {
  const auto& ins = graph.inputs();
  const auto& outs = graph.outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i] == value) return i == 0 ? "output" : "output_" + std::to_string(i);
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i] == value) return i == 0 ? "input" : "input_" + std::to_string(i);
  const auto& v = graph.values().at(value);
  const auto& op = graph.op(v.producer);
  for (size_t slot = 0; slot < op.outputs.size(); ++slot)
    if (op.outputs[slot] == value)
      return slot == 0 ? op.name : op.name + ":" + std::to_string(slot);
  return op.name;
}

std::string onnx_precision_name(OnnxPrecision p) {
  switch (p) {
    case OnnxPrecision::kFp16:
      return "fp16";
    case OnnxPrecision::kInt8:
      return "int8";
    case OnnxPrecision::kFp32:
      break;
  }
  return "fp32";
}

std::string onnx_io_string(const OnnxIo& io) {
  std::string s = io.name + " [";
  for (size_t i = 0; i < io.dims.size(); ++i) s += (i ? "," : "") + io.dims[i];
  return s + "]";
}

}  // namespace igb::deploy
