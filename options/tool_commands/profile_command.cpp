// igb-tools profile: per-layer latency, output bytes and top operators per batch size.
#include <CLI/CLI.hpp>

#include <iostream>

#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "options/common_options.h"
#include "options/inference_runtime.h"
#include "options/tool_commands/tool_command.h"
#include "tools/profile.h"

namespace igb::options {

namespace {

std::vector<int64_t> parse_batch_sizes(const std::string& text) {
  std::vector<int64_t> out;
  std::string cur;
  auto flush = [&] {
    if (cur.empty() || cur.find_first_not_of("0123456789") != std::string::npos || cur.size() > 7 ||
        std::stoll(cur) == 0)
      throw InputError("--batch-sizes '" + text +
                       "': give positive integers separated by commas, e.g. 1,16,64");
    out.push_back(std::stoll(cur));
    cur.clear();
  };
  for (char c : text) {
    if (c == ',')
      flush();
    else
      cur += c;
  }
  flush();
  return out;
}

/// One CSV of every layer at every batch size.
std::string layers_csv(const tools::ModelProfile& p) {
  Table t;
  t.columns = {"Batch", "Name", "Type", "Output", "Output bytes", "Forward (ms)", "Fwd+Bwd (ms)"};
  for (const auto& b : p.batches)
    for (const auto& l : b.layers)
      t.rows.push_back({std::to_string(b.batch), l.name, l.type, graph::shape_to_string(l.output),
                        std::to_string(l.output_bytes), fixed(l.forward_ms, 4),
                        fixed(l.forward_backward_ms, 4)});
  return t.to_csv();
}

class ProfileCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    add_target_options(sub, target_, true);
    sub.add_option("--batch-sizes", batch_sizes_, "Comma-separated batch sizes")
        ->capture_default_str();
    int_range(sub.add_option("--top", top_, "Rows of the operators table")->capture_default_str(),
              1, 1000);
    int_range(
        sub.add_option("--repeats", repeats_, "Timed runs per measurement (the median is reported)")
            ->capture_default_str(),
        1, 1000);
    sub.add_option("--trace", trace_,
                   "Write a Chrome trace (chrome://tracing, Perfetto) to this file");
    add_runtime_option(sub, runtime_);
    add_report_files(sub, files_);
  }
  void check_outputs() const override {
    files_.check();
    if (!trace_.empty()) check_output_file("--trace", trace_);
  }
  int run() override {
    configure_runtime(target_.threads, "cpu");
    tools::ProfileOptions po;
    po.batch_sizes = parse_batch_sizes(batch_sizes_);
    po.top = top_;
    po.repeats = repeats_;
    po.inference = runtime_ != kEagerRuntime;
    po.int8 = runtime_ == kInt8Runtime;
    const auto m = target_.load();
    Logger logger;
    const auto p = profile_and_print(m, po, logger);
    if (!files_.csv.empty()) write_text_atomically(files_.csv, layers_csv(p));
    if (!files_.json.empty())
      write_text_atomically(files_.json, tools::profile_json(p).dump(2) + "\n");
    if (!trace_.empty()) write_text_atomically(trace_, p.chrome_trace.dump() + "\n");
    return kExitOk;
  }

 private:
  ToolTarget target_;
  ReportFiles files_;
  std::string batch_sizes_ = "1", trace_, runtime_ = kInferenceRuntime;
  int top_ = 10, repeats_ = 5;
};

}  // namespace

void add_profile_command(Registry<ToolCommandSpec>& r) {
  r.add("profile", {[] { return std::make_unique<ProfileCommand>(); }},
        "Per-layer latency, output bytes and top operators per batch size");
}

}  // namespace igb::options
