#include "runtime/plan.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>

#include "core/error.h"
#include "core/tensor_util.h"
#include "graph/summary_graph.h"

namespace igb::runtime {

dnnl::memory::desc plain_desc(const std::vector<int64_t>& shape) {
  dnnl::memory::dims strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return {dims_of(shape), dnnl::memory::data_type::f32, strides};
}

namespace {

std::string shape_text(at::IntArrayRef sizes) {
  return graph::shape_to_string(std::vector<int64_t>(sizes.begin(), sizes.end()));
}

}  // namespace

PrimitiveStep::PrimitiveStep(dnnl::primitive primitive, StepInfo step_info)
    : primitive_(std::move(primitive)) {
  info = std::move(step_info);
  info.native = true;
  info.implementation = implementation_of(primitive_);
}

std::string implementation_of(const dnnl::primitive& primitive) {
  const char* impl = nullptr;
  if (dnnl_primitive_desc_query(primitive.get_primitive_desc(), dnnl_query_impl_info_str, 0,
                                &impl) != dnnl_success ||
      !impl)
    return {};
  return impl;
}

void PrimitiveStep::use(int arg, int native, bool written) {
  natives_.emplace_back(arg, native);
  (written ? writes : reads).push_back(native);
}

dnnl::primitive_attr user_scratchpad(dnnl::primitive_attr attr) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::primitive_attr reorder_attr(float scale) {
  dnnl::primitive_attr attr;
  if (scale != 1) attr.set_output_scales(0, {scale});
  return user_scratchpad(attr);
}

void PrimitiveStep::bind(Plan& plan) {
  args_.clear();
  args_[DNNL_ARG_SCRATCHPAD] = plan.scratchpad;
  for (const auto& [arg, native] : natives_) args_[arg] = plan.memory(native);
  for (const auto& [arg, memory] : owned_) args_[arg] = memory;
}

void PrimitiveStep::run(Plan& plan) { primitive_.execute(plan.stream, args_); }

ToNativeStep::ToNativeStep(Plan& plan, int slot, int native, const std::vector<int64_t>& shape,
                           float scale)
    : slot_(slot), native_(native), shape_(shape), plain_(plain_desc(shape)) {
  const dnnl::reorder::primitive_desc pd(plan.engine, plain_, plan.engine,
                                         plan.natives[native].desc, reorder_attr(scale));
  plan.need_scratchpad(pd);
  reorder_ = dnnl::reorder(pd);
  slot_reads.push_back(slot);
  writes.push_back(native);
  info.kind = "Reorder";
  info.native = true;
}

void ToNativeStep::run(Plan& plan) {
  at::Tensor t = plan.env.at(slot_).toTensor();
  if (t.sizes() != at::IntArrayRef(shape_) || t.scalar_type() != at::kFloat)
    throw InputError("the inference plan was made for a float tensor of shape " +
                     graph::shape_to_string(shape_) + ", got " + shape_text(t.sizes()) + " " +
                     std::string(c10::toString(t.scalar_type())));
  t = t.contiguous();
  if (zero_copy_) {
    held_ = t;
    plan.memory(native_).set_data_handle(t.data_ptr());
    return;
  }
  dnnl::memory src(plain_, plan.engine, t.data_ptr());
  reorder_.execute(plan.stream, {{DNNL_ARG_FROM, src},
                                 {DNNL_ARG_TO, plan.memory(native_)},
                                 {DNNL_ARG_SCRATCHPAD, plan.scratchpad}});
}

void ToNativeStep::bind(Plan& plan) {
  zero_copy_ = plan.natives[native_].desc == plain_;
  for (const auto& n : plan.natives) zero_copy_ = zero_copy_ && n.alias != native_;
  for (const auto& step : plan.steps)
    if (step.get() != this)
      for (int w : step->writes) zero_copy_ = zero_copy_ && w != native_;
}

ToPlainStep::ToPlainStep(Plan& plan, int native, int slot, const std::vector<int64_t>& shape,
                         float scale)
    : native_(native), slot_(slot), shape_(shape), plain_(plain_desc(shape)) {
  const dnnl::reorder::primitive_desc pd(plan.engine, plan.natives[native].desc, plan.engine,
                                         plain_, reorder_attr(scale));
  plan.need_scratchpad(pd);
  reorder_ = dnnl::reorder(pd);
  reads.push_back(native);
  info.kind = "Reorder";
  info.native = true;
}

void ToPlainStep::run(Plan& plan) {
  at::Tensor t = at::empty(shape_, at::TensorOptions().dtype(at::kFloat));
  dnnl::memory dst(plain_, plan.engine, t.data_ptr());
  reorder_.execute(plan.stream, {{DNNL_ARG_FROM, plan.memory(native_)},
                                 {DNNL_ARG_TO, dst},
                                 {DNNL_ARG_SCRATCHPAD, plan.scratchpad}});
  plan.env.at(slot_) = std::move(t);
}

SubpixelStep::SubpixelStep(Plan& plan, int native, int slot, std::vector<int64_t> shape,
                           int64_t stride, std::vector<int64_t> crop)
    : native_(native),
      slot_(slot),
      shape_(std::move(shape)),
      stride_(stride),
      crop_(std::move(crop)),
      plain_(plain_desc(shape_)) {
  const dnnl::reorder::primitive_desc pd(plan.engine, plan.natives[native].desc, plan.engine,
                                         plain_, user_scratchpad());
  plan.need_scratchpad(pd);
  reorder_ = dnnl::reorder(pd);
  reads.push_back(native);
}

void SubpixelStep::run(Plan& plan) {
  at::Tensor phases = at::empty(shape_, at::TensorOptions().dtype(at::kFloat));
  dnnl::memory dst(plain_, plan.engine, phases.data_ptr());
  reorder_.execute(plan.stream, {{DNNL_ARG_FROM, plan.memory(native_)},
                                 {DNNL_ARG_TO, dst},
                                 {DNNL_ARG_SCRATCHPAD, plan.scratchpad}});
  plan.env.at(slot_) = fast_pixel_shuffle(phases, stride_)
                           .narrow(2, crop_[0], crop_[2])
                           .narrow(3, crop_[1], crop_[3])
                           .contiguous();
}

ViewReorderStep::ViewReorderStep(Plan& plan, int src, dnnl::memory::desc from, int dst,
                                 dnnl::memory::desc to, StepInfo step_info)
    : src_(src), dst_(dst), from_(std::move(from)), to_(std::move(to)) {
  info = std::move(step_info);
  const dnnl::reorder::primitive_desc pd(plan.engine, from_, plan.engine, to_, user_scratchpad());
  plan.need_scratchpad(pd);
  reorder_ = dnnl::reorder(pd);
  info.implementation = implementation_of(reorder_);
  info.native = true;
  reads.push_back(src);
  writes.push_back(dst);
}

void ViewReorderStep::run(Plan& plan) {
  // The buffers' addresses as they are now (a plan's input may be read in place).
  dnnl::memory from(from_, plan.engine, plan.memory(src_).get_data_handle());
  dnnl::memory to(to_, plan.engine, plan.memory(dst_).get_data_handle());
  reorder_.execute(
      plan.stream,
      {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, plan.scratchpad}});
}

Int8ViewStep::Int8ViewStep(int src, int dst, std::vector<int64_t> in, std::vector<int64_t> out,
                           View view)
    : src_(src), dst_(dst), in_(std::move(in)), out_(std::move(out)), view_(view) {
  reads = {src_};
  writes = {dst_};
}

void Int8ViewStep::run(Plan& plan) {
  const auto* src = static_cast<const uint8_t*>(plan.memory(src_).get_data_handle());
  auto* dst = static_cast<uint8_t*>(plan.memory(dst_).get_data_handle());
  const int64_t c_in = in_[1], h_in = in_[2], w_in = in_[3];
  const int64_t c_out = out_[1], h_out = out_[2], w_out = out_[3];
  const auto& v = view_;
  const int64_t back = c_out - v.pad_front - v.channels;
  for (int64_t n = 0; n < out_[0]; ++n)
    for (int64_t h = 0; h < h_out; ++h)
      for (int64_t w = 0; w < w_out; ++w) {
        uint8_t* row = dst + ((n * h_out + h) * w_out + w) * c_out;
        const uint8_t* from =
            src +
            ((n * h_in + h * v.step[1] + v.start[1]) * w_in + w * v.step[2] + v.start[2]) * c_in +
            v.start[0];
        std::memset(row, 0, static_cast<size_t>(v.pad_front));
        if (v.step[0] == 1) {
          std::memcpy(row + v.pad_front, from, static_cast<size_t>(v.channels));
        } else {
          for (int64_t c = 0; c < v.channels; ++c) row[v.pad_front + c] = from[c * v.step[0]];
        }
        std::memset(row + v.pad_front + v.channels, 0, static_cast<size_t>(back));
      }
}

TorchStep::TorchStep(torch::jit::Node* node, std::vector<int> inputs, std::vector<int> outputs)
    : node_(node), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {
  slot_reads = inputs_;
  info.kind = node->kind().toQualString();
}

void TorchStep::run(Plan& plan) {
  torch::jit::Stack stack;
  stack.reserve(inputs_.size());
  for (int slot : inputs_) stack.push_back(plan.env[slot]);
  graph::run_traced_node(node_, stack);
  for (size_t i = 0; i < outputs_.size(); ++i) plan.env[outputs_[i]] = std::move(stack.at(i));
}

Plan::Plan() : engine(dnnl::engine::kind::cpu, 0), stream(engine) {}

int Plan::add_native(const dnnl::memory::desc& desc, int alias) {
  NativeTensor t;
  t.desc = desc;
  t.alias = alias;
  natives.push_back(std::move(t));
  return static_cast<int>(natives.size()) - 1;
}

void Plan::allocate() {
  const int n = static_cast<int>(natives.size());
  const auto root = [&](int v) {
    while (natives[v].alias >= 0) v = natives[v].alias;
    return v;
  };
  std::vector<int> first(n, std::numeric_limits<int>::max()), last(n, -1);
  for (int s = 0; s < static_cast<int>(steps.size()); ++s) {
    for (const auto* list : {&steps[s]->reads, &steps[s]->writes})
      for (int v : *list) {
        const int r = root(v);
        first[r] = std::min(first[r], s);
        last[r] = std::max(last[r], s);
      }
  }
  // Greedy by first use: each tensor takes the smallest free buffer that holds it.
  std::vector<size_t> sizes;
  std::multimap<size_t, int> free_buffers;
  std::vector<std::vector<int>> ends(steps.size());
  for (int s = 0; s < static_cast<int>(steps.size()); ++s) {
    for (int v : steps[s]->writes) {
      const int r = root(v);
      if (natives[r].buffer >= 0 || first[r] != s) continue;
      const size_t need = natives[r].desc.get_size();
      auto it = free_buffers.lower_bound(need);
      if (it != free_buffers.end()) {
        natives[r].buffer = it->second;
        free_buffers.erase(it);
      } else {
        natives[r].buffer = static_cast<int>(sizes.size());
        sizes.push_back(need);
      }
      ends[last[r]].push_back(r);
    }
    for (int r : ends[s]) free_buffers.emplace(sizes[natives[r].buffer], natives[r].buffer);
  }
  scratchpad = dnnl::memory({{static_cast<int64_t>(std::max<size_t>(scratchpad_bytes, 1))},
                             dnnl::memory::data_type::u8,
                             dnnl::memory::format_tag::x},
                            engine);
  arena_.clear();
  arena_bytes = 0;
  for (size_t size : sizes) {
    arena_.push_back(at::empty({static_cast<int64_t>((size + 3) / 4)}, at::kFloat));
    arena_bytes += static_cast<int64_t>(size);
  }
  for (int v = 0; v < n; ++v) {
    const int b = natives[root(v)].buffer;
    if (b < 0) continue;  // never written: unused
    natives[v].memory = dnnl::memory(natives[v].desc, engine, arena_[b].data_ptr());
  }
  for (auto& step : steps) step->bind(*this);
  // Each non-constant slot is released after its last reader.
  release_.assign(steps.size(), {});
  std::vector<int> last_read(env.size(), -1);
  for (int s = 0; s < static_cast<int>(steps.size()); ++s)
    for (int slot : steps[s]->slot_reads) last_read[slot] = s;
  for (int slot = 0; slot < static_cast<int>(env.size()); ++slot)
    if (last_read[slot] >= 0 && !constant[slot] &&
        std::none_of(outputs.begin(), outputs.end(),
                     [&](const auto& o) { return o.second == slot; }))
      release_[last_read[slot]].push_back(slot);
}

void Plan::run_steps(std::vector<double>* times) {
  using Clock = std::chrono::steady_clock;
  // oneDNN's OpenMP teams take the calling thread's thread count. LibTorch gives a thread the
  // process's count (set_num_threads) at its first parallel call, get_num_threads included; a
  // thread that has made none (a serving worker's request thread) would run oneDNN on every core.
  (void)at::get_num_threads();
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto start = Clock::now();
    steps[s]->run(*this);
    if (times) {
      stream.wait();
      (*times)[s] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
    for (int slot : release_[s]) env[slot] = c10::IValue();
  }
  stream.wait();
}

void Plan::clear_ends() {
  for (const auto& [id, slot] : outputs) env[slot] = c10::IValue();
  for (const auto& [id, slot] : inputs) env[slot] = c10::IValue();
}

at::Tensor Plan::run(const at::Tensor& input) {
  env[inputs.at(0).second] = input;
  run_steps(nullptr);
  c10::IValue out = std::move(env[outputs.at(0).second]);
  clear_ends();
  if (out.isTuple()) out = out.toTupleRef().elements().at(0);
  return out.toTensor();
}

bool Plan::run_values(std::map<int, at::Tensor>& values) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto it = values.find(inputs[i].first);
    if (it == values.end() || !it->second.defined() || it->second.sizes() != input_shapes[i] ||
        it->second.scalar_type() != at::kFloat || !it->second.device().is_cpu())
      return false;
  }
  for (const auto& [id, slot] : inputs) env[slot] = values.at(id);
  run_steps(nullptr);
  for (const auto& [id, slot] : outputs) values[id] = env[slot].toTensor();
  clear_ends();
  return true;
}

std::vector<double> Plan::time_steps(const at::Tensor& input, int repeats) {
  run(input);
  std::vector<std::vector<double>> runs(steps.size());
  std::vector<double> times(steps.size());
  for (int r = 0; r < std::max(1, repeats); ++r) {
    env[inputs.at(0).second] = input;
    run_steps(&times);
    clear_ends();
    for (size_t s = 0; s < steps.size(); ++s) runs[s].push_back(times[s]);
  }
  std::vector<double> medians;
  for (auto& v : runs) {
    std::sort(v.begin(), v.end());
    medians.push_back(v[v.size() / 2]);
  }
  return medians;
}

}  // namespace igb::runtime
