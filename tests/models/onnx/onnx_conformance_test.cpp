// ONNX's own backend tests (Debian's libonnx-testdata: node/, pytorch-converted/,
// pytorch-operator/, simple/) through the importer: every case whose operators igb imports must
// compute the expected outputs (rtol 1e-3, atol 1e-4) or be refused with its reason; none may
// compute a wrong answer or fail inside an operator. The table of docs/onnx-import.md is this
// test's report (IGB_ONNX_CONFORMANCE_OUT=FILE writes it as Markdown).
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "models/onnx/onnx_body.h"
#include "models/onnx/onnx_ops.h"
#include "models/onnx/onnx_tensor.h"

namespace igb::models::onnx_import {
namespace {

namespace fs = std::filesystem;

const char* kTestData = "/usr/share/libonnx-testdata/data";
const char* const kSuites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

enum class Outcome { kPassed, kRefused, kUnsupported, kWrong, kFailed };

struct CaseResult {
  std::string suite;
  std::string name;
  std::set<std::string> ops;
  Outcome outcome = Outcome::kPassed;
  std::string detail;
};

/// The files `prefix`_0.pb, `prefix`_1.pb, ... of a data set, in order.
std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (int i = 0;; ++i) {
    const fs::path p = dir / (prefix + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p);
  }
  return out;
}

/// Why `got` is not `want` ("" when it is).
std::string compare(const at::Tensor& got, const at::Tensor& want) {
  if (!got.defined()) return "no output";
  if (got.sizes() != want.sizes()) {
    std::ostringstream s;
    s << "shape " << got.sizes() << ", expected " << want.sizes();
    return s.str();
  }
  if (got.scalar_type() != want.scalar_type())
    return std::string("type ") + c10::toString(got.scalar_type()) + ", expected " +
           c10::toString(want.scalar_type());
  if (want.numel() == 0) return "";
  if (!at::isFloatingType(want.scalar_type())) return at::equal(got, want) ? "" : "values differ";
  const auto g = got.to(at::kDouble), w = want.to(at::kDouble);
  const auto both_nan = at::logical_and(g.isnan(), w.isnan());
  const auto same_inf = at::logical_and(g.isinf(), g == w);
  const auto close = (g - w).abs() <= (w.abs() * 1e-3 + 1e-4);
  const auto ok = at::logical_or(at::logical_or(both_nan, same_inf), close);
  if (ok.all().item<bool>()) return "";
  const auto diff = at::where(ok, at::zeros_like(g), (g - w).abs());
  return "largest difference " + std::to_string(diff.max().item<double>());
}

CaseResult run_case(const std::string& suite, const fs::path& dir) {
  CaseResult r;
  r.suite = suite;
  r.name = dir.filename().string();
  std::shared_ptr<const OnnxGraph> graph;
  try {
    graph = load_onnx_graph((dir / "model.onnx").string());
  } catch (const InputError& e) {
    r.outcome = Outcome::kRefused;
    r.detail = e.what();
    return r;
  }
  for (const auto& n : graph->nodes)
    r.ops.insert((n.domain.empty() ? "" : n.domain + ".") + n.op_type);
  const auto unsupported = unsupported_ops(*graph);
  if (!unsupported.empty()) {
    r.outcome = Outcome::kUnsupported;
    r.detail = unsupported.front();
    return r;
  }
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  try {
    std::unique_ptr<OnnxBody> body;
    torch::nn::Module owner;
    torch::NoGradGuard no_grad;
    for (const auto& set : sets) {
      std::vector<at::Tensor> inputs;
      for (const auto& p : numbered(set, "input")) inputs.push_back(read_tensor_file(p.string()));
      if (inputs.size() != graph->inputs.size()) {
        r.outcome = Outcome::kRefused;
        r.detail = "the data set gives " + std::to_string(inputs.size()) +
                   " inputs, the graph takes " + std::to_string(graph->inputs.size());
        return r;
      }
      if (!body) {
        body = std::make_unique<OnnxBody>(graph, owner, inputs);
        owner.eval();
      }
      const auto outputs = body->run(inputs);
      const auto expected = numbered(set, "output");
      for (size_t i = 0; i < expected.size() && i < outputs.size(); ++i) {
        const std::string why = compare(outputs[i], read_tensor_file(expected[i].string()));
        if (!why.empty()) {
          r.outcome = Outcome::kWrong;
          r.detail = set.filename().string() + " output " + std::to_string(i) + ": " + why;
          return r;
        }
      }
    }
  } catch (const OnnxRunError& e) {
    r.outcome = Outcome::kFailed;
    r.detail = e.what();
  } catch (const InputError& e) {
    r.outcome = Outcome::kRefused;
    r.detail = e.what();
  } catch (const std::exception& e) {
    r.outcome = Outcome::kFailed;
    r.detail = std::string("escaped: ") + e.what();
  }
  return r;
}

/// The refusal without the files' paths, which differ between machines.
std::string short_reason(const std::string& detail) {
  const auto at = detail.find(".pb: ");
  if (at != std::string::npos) {
    const auto slash = detail.rfind('/', at);
    return detail.substr(slash == std::string::npos ? 0 : slash + 1);
  }
  const auto pos = detail.find("model.onnx: ");
  return pos == std::string::npos ? detail : detail.substr(pos + 12);
}

struct OpRow {
  int cases = 0, passed = 0, refused = 0, wrong = 0, other_op = 0;
};

std::string report(const std::vector<CaseResult>& results) {
  const auto& table = onnx_op_table();
  std::map<std::string, OpRow> rows;
  std::map<std::string, int> unsupported;
  int passed = 0, refused = 0, skipped = 0, wrong = 0;
  for (const auto& r : results) {
    for (const auto& op : r.ops) {
      if (!table.count(op)) {
        if (r.outcome == Outcome::kUnsupported) ++unsupported[op];
        continue;
      }
      auto& row = rows[op];
      ++row.cases;
      switch (r.outcome) {
        case Outcome::kPassed:
          ++row.passed;
          break;
        case Outcome::kRefused:
          ++row.refused;
          break;
        case Outcome::kUnsupported:
          ++row.other_op;
          break;
        default:
          ++row.wrong;
          break;
      }
    }
    passed += r.outcome == Outcome::kPassed;
    refused += r.outcome == Outcome::kRefused;
    skipped += r.outcome == Outcome::kUnsupported;
    wrong += r.outcome == Outcome::kWrong || r.outcome == Outcome::kFailed;
  }
  std::ostringstream s;
  s << results.size() << " cases: " << passed << " passed, " << refused << " refused, " << wrong
    << " wrong or failed, " << skipped << " use an operator igb does not import\n\n";
  s << "| op | cases | passed | refused | wrong | with an op not imported |\n";
  s << "|---|---:|---:|---:|---:|---:|\n";
  for (const auto& [op, row] : rows)
    s << "| " << op << " | " << row.cases << " | " << row.passed << " | " << row.refused << " | "
      << row.wrong << " | " << row.other_op << " |\n";
  s << "\nRefused cases:\n\n| case | reason |\n|---|---|\n";
  for (const auto& r : results)
    if (r.outcome == Outcome::kRefused)
      s << "| " << r.suite << "/" << r.name << " | " << short_reason(r.detail) << " |\n";
  s << "\nWrong or failed cases:\n\n";
  for (const auto& r : results)
    if (r.outcome == Outcome::kWrong || r.outcome == Outcome::kFailed)
      s << "- " << r.suite << "/" << r.name << ": " << short_reason(r.detail) << "\n";
  s << "\nOperators not imported (cases using them): ";
  bool first = true;
  for (const auto& [op, n] : unsupported) {
    s << (first ? "" : ", ") << op << " (" << n << ")";
    first = false;
  }
  s << "\n";
  return s.str();
}

TEST(OnnxConformance, EveryCaseOfAnImportedOpPassesOrIsRefusedWithItsReason) {
  const char* env = std::getenv("IGB_ONNX_TESTDATA");
  const fs::path root = env ? env : kTestData;
  if (!fs::exists(root / "node"))
    GTEST_SKIP() << root
                 << " is missing: install Debian's libonnx-testdata (scripts/setup.sh does)";
  std::vector<CaseResult> results;
  for (const char* suite : kSuites) {
    std::vector<fs::path> cases;
    if (!fs::exists(root / suite)) continue;
    for (const auto& e : fs::directory_iterator(root / suite))
      if (fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
    std::sort(cases.begin(), cases.end());
    for (const auto& c : cases) results.push_back(run_case(suite, c));
  }
  const std::string text = report(results);
  std::cout << text;
  if (const char* out = std::getenv("IGB_ONNX_CONFORMANCE_OUT")) std::ofstream(out) << text;
  int passed = 0;
  for (const auto& r : results) {
    EXPECT_NE(r.outcome, Outcome::kWrong) << r.suite << "/" << r.name << ": " << r.detail;
    EXPECT_NE(r.outcome, Outcome::kFailed) << r.suite << "/" << r.name << ": " << r.detail;
    passed += r.outcome == Outcome::kPassed;
  }
  EXPECT_GE(results.size(), 1000u);
  EXPECT_GE(passed, 300);
}

}  // namespace
}  // namespace igb::models::onnx_import
