#include "tools/sensitivity.h"

#include <expat.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "compress/scheduler.h"
#include "core/error.h"
#include "core/fs.h"
#include "data/image.h"
#include "tests/support.h"
#include "tests/tools/tools_support.h"
#include "tools/plot.h"
#include "tools/schedule_suggestion.h"

namespace igb::tools {

namespace {

namespace fs = std::filesystem;

/// Every parameter and buffer of `m`, cloned.
std::map<std::string, at::Tensor> sensitivity_snapshot(torch::nn::Module& m) {
  std::map<std::string, at::Tensor> s;
  for (const auto& p : m.named_parameters()) s[p.key()] = p.value().detach().clone();
  for (const auto& b : m.named_buffers()) s[b.key()] = b.value().detach().clone();
  return s;
}

/// An evaluator on one fixed batch: mean squared difference from the unpruned output and the
/// share of argmax agreements with it, in %.
std::function<SensitivityMetrics()> sensitivity_evaluator(const models::Model& m,
                                                          const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  const auto reference = m->forward(x).detach().clone();
  return [m, x, reference]() -> SensitivityMetrics {
    torch::NoGradGuard no_grad;
    const auto y = m->forward(x);
    return {{"agreement",
             y.argmax(1).eq(reference.argmax(1)).to(at::kDouble).mean().item<double>() * 100},
            {"mse", (y - reference).pow(2).mean().item<double>()}};
  };
}

bool sensitivity_xml_well_formed(const std::string& text) {
  XML_Parser p = XML_ParserCreate(nullptr);
  const bool ok = XML_Parse(p, text.data(), static_cast<int>(text.size()), 1) == XML_STATUS_OK;
  XML_ParserFree(p);
  return ok;
}

}  // namespace

TEST(Sensitivity, LevelsParseAsRangesAndLists) {
  const auto l = parse_sensitivity_levels("0:0.95:0.05");
  ASSERT_EQ(l.size(), 20u);
  EXPECT_DOUBLE_EQ(l.front(), 0.0);
  EXPECT_DOUBLE_EQ(l.back(), 0.95);
  EXPECT_DOUBLE_EQ(l[7], 0.35);
  EXPECT_EQ(parse_sensitivity_levels("0,0.5,0.9"), (std::vector<double>{0, 0.5, 0.9}));
  for (const char* bad : {"0:1.2:0.1", "0:0.5", "a,b", "0:0.5:0", "0.5:0.1:0.1", "1"})
    EXPECT_THROW(parse_sensitivity_levels(bad), InputError) << bad;
  EXPECT_THROW(parse_sensitivity_mode("rows"), InputError);
}

// Level 0 gives the baseline exactly; every tensor is bit-identical after the sweep; the CSV has
// a header and parameters × levels rows; the element pruner reaches the level asked for.
TEST(Sensitivity, ElementSweepRestoresEveryTensorAndLevelZeroIsTheBaseline) {
  torch::manual_seed(0);
  auto m = make("resnet20_cifar");
  m->eval();
  const auto graph = graph_of(m, "resnet20_cifar");
  const auto before = sensitivity_snapshot(*m);
  const auto x = torch::rand({16, 3, 32, 32});
  const auto options =
      SensitivityOptions().levels({0.0, 0.5, 0.9}).params("layer1\\.0\\.|fc\\.weight");
  int calls = 0;
  const auto r = sensitivity_sweep(*m, graph, options, sensitivity_evaluator(m, x),
                                   [&](const std::string&, double, int64_t done, int64_t total) {
                                     EXPECT_EQ(done, calls++);
                                     EXPECT_EQ(total, 10);
                                   });
  EXPECT_EQ(r.parameters, (std::vector<std::string>{"layer1.0.conv1.weight",
                                                    "layer1.0.conv2.weight", "fc.weight"}));
  ASSERT_EQ(r.rows.size(), 9u);
  EXPECT_EQ(r.evaluations, 10);
  EXPECT_EQ(r.baseline[0].second, 100.0);
  for (const auto& row : r.rows) {
    if (row.level == 0) {
      EXPECT_EQ(row.metrics, r.baseline) << row.parameter;
      EXPECT_EQ(row.sparsity, 0.0);
    } else {
      EXPECT_GE(row.sparsity, row.level - 1e-3) << row.parameter;
      EXPECT_LT(row.sparsity, row.level + 0.01) << row.parameter;
      EXPECT_GT(row.metrics[1].second, 0.0) << row.parameter;
    }
  }
  for (const auto& [name, t] : sensitivity_snapshot(*m))
    EXPECT_TRUE(torch::equal(t, before.at(name))) << name;
  const std::string csv = sensitivity_csv(r);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "parameter,sparsity,agreement,mse");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 10);
  EXPECT_NE(csv.find("\nfc.weight,0.500000,"), std::string::npos) << csv;
}

// With dependencies a pruned filter takes its batch-norm entries and the next conv's input
// channels along, as thinning would; without, only the filter.
TEST(Sensitivity, FilterSweepWithDependenciesZeroesTheWholeGroup) {
  torch::manual_seed(1);
  auto m = make("resnet20_cifar");
  m->eval();
  const auto graph = graph_of(m, "resnet20_cifar");
  const auto before = sensitivity_snapshot(*m);
  const auto x = torch::rand({8, 3, 32, 32});
  auto base = sensitivity_evaluator(m, x);
  for (const bool deps : {false, true}) {
    std::vector<int64_t> zero_bn, zero_consumer, zero_filters;
    auto evaluate = [&]() {
      auto p = m->named_parameters();
      zero_filters.push_back(
          p["layer1.0.conv1.weight"].abs().sum({1, 2, 3}).eq(0).sum().item<int64_t>());
      zero_bn.push_back(p["layer1.0.bn1.weight"].eq(0).sum().item<int64_t>());
      zero_consumer.push_back(
          p["layer1.0.conv2.weight"].abs().sum({0, 2, 3}).eq(0).sum().item<int64_t>());
      return base();
    };
    const auto r = sensitivity_sweep(*m, graph,
                                     SensitivityOptions()
                                         .mode(SensitivityMode::kFilter)
                                         .levels({0.5})
                                         .params("^layer1\\.0\\.conv1\\.")
                                         .with_dependencies(deps),
                                     evaluate);
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_DOUBLE_EQ(r.rows[0].sparsity, 0.5);
    // The baseline call, then the level-0.5 one.
    ASSERT_EQ(zero_filters.size(), 2u);
    EXPECT_EQ(zero_filters[0], 0);
    EXPECT_EQ(zero_filters[1], 8);
    EXPECT_EQ(zero_bn[1], deps ? 8 : 0);
    EXPECT_EQ(zero_consumer[1], deps ? 8 : 0);
    for (const auto& [name, t] : sensitivity_snapshot(*m))
      EXPECT_TRUE(torch::equal(t, before.at(name))) << name;
  }
  EXPECT_THROW(sensitivity_sweep(*m, graph,
                                 SensitivityOptions()
                                     .mode(SensitivityMode::kChannel)
                                     .levels({0.5})
                                     .with_dependencies(true),
                                 base),
               InputError);
  EXPECT_THROW(sensitivity_parameters(*m, graph, SensitivityOptions().params("nothing")),
               InputError);
  EXPECT_THROW(sensitivity_parameters(*m, graph, SensitivityOptions().params("(")), InputError);
}

// The written files: the CSV and JSON agree, the SVG is well-formed XML, the PNG decodes at the
// plot's size and is not blank.
TEST(Sensitivity, ReportsAndPlotFiles) {
  torch::manual_seed(2);
  auto m = make("fsrcnn", {{"d", 8}, {"s", 4}, {"m", 1}});
  m->eval();
  const auto graph = graph_of(m, "fsrcnn");
  const auto x = torch::rand({2, 1, 24, 24});
  torch::NoGradGuard no_grad;
  const auto ref = m->forward(x).detach().clone();
  const auto r = sensitivity_sweep(
      *m, graph, SensitivityOptions().levels({0, 0.3, 0.6, 0.9}), [&]() -> SensitivityMetrics {
        const auto mse = (m->forward(x) - ref).pow(2).mean();
        return {{"psnr", -10 * std::log10(std::max(mse.item<double>(), 1e-12))}};
      });
  test::TempDir tmp;
  const auto paths = write_sensitivity(r, tmp.path() / "out");
  ASSERT_EQ(paths.size(), 4u);
  for (const auto& p : paths) EXPECT_TRUE(fs::exists(p)) << p;
  const auto json = nlohmann::json::parse(read_text_file(paths[1]));
  EXPECT_EQ(json["rows"].size(), r.parameters.size() * 4);
  EXPECT_EQ(json["mode"], "element");
  EXPECT_EQ(json["metrics"], nlohmann::json::array({"psnr"}));
  const std::string svg = read_text_file(paths[2]);
  EXPECT_TRUE(sensitivity_xml_well_formed(svg));
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  const auto png = data::read_image(paths[3]);
  ASSERT_EQ(png.dim(), 3);
  EXPECT_EQ(png.size(1), 600);
  EXPECT_EQ(png.size(2), 960);
  EXPECT_GT(png.std().item<double>(), 0.01);  // lines and text on white
  EXPECT_THROW(write_sensitivity(r, tmp.path() / "out2", "top1"), InputError);
  EXPECT_FALSE(fs::exists(tmp.path() / "out2" / "sensitivity.csv"));
}

}  // namespace igb::tools

namespace igb::tools {

namespace {

/// A sweep table written by hand: two weights at levels 0, 0.25, 0.5, 0.75.
fs::path suggestion_csv(const fs::path& dir, const std::string& mode) {
  fs::create_directories(dir);
  write_text_atomically(dir / "sensitivity.csv",
                        "parameter,sparsity,top1,top5,loss\n"
                        "a.weight,0,90,99,0.30\n"
                        "a.weight,0.25,89.9,99,0.31\n"
                        "a.weight,0.5,89.5,99,0.35\n"
                        "a.weight,0.75,80,95,0.90\n"
                        "b.weight,0,90,99,0.30\n"
                        "b.weight,0.25,89.0,99,0.50\n"
                        "b.weight,0.5,89.9,99,0.32\n"
                        "b.weight,0.75,70,90,1.50\n");
  write_text_atomically(dir / "sensitivity.json", "{\"mode\": \"" + mode + "\"}\n");
  return dir / "sensitivity.csv";
}

}  // namespace

// The highest level at which this and every lower level stay within the budget: b's dip at 0.25
// stops it there even though 0.5 is within the budget again.
TEST(SuggestSchedule, PicksTheHighestLevelWithinTheBudgetAndWritesALoadableSchedule) {
  test::TempDir tmp;
  const auto table = read_sensitivity_csv(suggestion_csv(tmp.path() / "e", "element"));
  EXPECT_EQ(table.metrics, (std::vector<std::string>{"top1", "top5", "loss"}));
  SuggestOptions o;
  o.max_drop = 0.6;
  o.start_epoch = 0;
  o.end_epoch = 4;
  auto s = suggest_schedule(table, o);
  ASSERT_EQ(s.choices.size(), 2u);
  EXPECT_DOUBLE_EQ(s.choices[0].sparsity, 0.5);
  EXPECT_NEAR(s.choices[0].drop, 0.5, 1e-9);
  EXPECT_DOUBLE_EQ(s.choices[1].sparsity, 0.0);  // 1.0 down at 0.25
  o.max_drop = 1.0;
  s = suggest_schedule(table, o);
  EXPECT_DOUBLE_EQ(s.choices[1].sparsity, 0.5);
  EXPECT_NE(s.yaml.find("class: AutomatedGradualPruner"), std::string::npos) << s.yaml;
  EXPECT_NE(s.yaml.find("final_sparsity: 0.5000"), std::string::npos) << s.yaml;
  EXPECT_NE(s.yaml.find("#   b.weight: 0.50 (top1 90.0000, drop 0.1000)"), std::string::npos)
      << s.yaml;
  // The loss metric drops when it rises: a within 0.06 up to 0.5, b only at 0.
  o.metric = "loss";
  o.max_drop = 0.06;
  s = suggest_schedule(table, o);
  EXPECT_DOUBLE_EQ(s.choices[0].sparsity, 0.5);
  EXPECT_DOUBLE_EQ(s.choices[1].sparsity, 0.0);

  // Element sparsities a hair under their level (floor of level · size) share one pruner.
  SensitivityTable near;
  near.metrics = {"top1"};
  near.parameters = {"a", "b"};
  near.rows["a"] = {{0, {90}}, {0.5998, {89.9}}};
  near.rows["b"] = {{0, {90}}, {0.6, {89.9}}};
  SuggestOptions n;
  n.end_epoch = 2;
  const auto grouped = suggest_schedule(near, n);
  EXPECT_EQ(grouped.yaml.find("agp_1"), std::string::npos) << grouped.yaml;
  EXPECT_NE(grouped.yaml.find("final_sparsity: 0.6000\n    weights:\n      - a\n      - b\n"),
            std::string::npos)
      << grouped.yaml;

  // Loadable by the scheduler on a model with those names.
  auto m = make("resnet20_cifar");
  const auto t2 = read_sensitivity_csv([&] {
    const auto dir = tmp.path() / "f";
    fs::create_directories(dir);
    write_text_atomically(dir / "sensitivity.csv",
                          "parameter,sparsity,top1\nlayer1.0.conv1.weight,0,90\n"
                          "layer1.0.conv1.weight,0.25,89.8\nlayer2.0.conv1.weight,0,90\n"
                          "layer2.0.conv1.weight,0.25,89.9\nfc.weight,0,90\nfc.weight,0.25,80\n");
    write_text_atomically(dir / "sensitivity.json", "{\"mode\": \"filter\"}\n");
    return dir / "sensitivity.csv";
  }());
  SuggestOptions f;
  f.max_drop = 0.5;
  f.end_epoch = 3;
  const auto agp = suggest_schedule(t2, f);
  EXPECT_NE(agp.yaml.find("class: L1RankedStructureParameterPruner_AGP"), std::string::npos);
  EXPECT_NE(agp.yaml.find("group_type: Filters"), std::string::npos);
  auto sched =
      compress::CompressionScheduler::from_text(agp.yaml, "suggested.yaml", *m, 0.1, nullptr);
  ASSERT_NE(sched, nullptr);
  f.kind = "sensitivity";
  EXPECT_THROW(suggest_schedule(t2, f), InputError);  // a filter sweep
}

TEST(SuggestSchedule, SensitivityPrunerMultipliersAndErrors) {
  test::TempDir tmp;
  const auto table = read_sensitivity_csv(suggestion_csv(tmp.path() / "e", "element"));
  SuggestOptions o;
  o.kind = "sensitivity";
  o.max_drop = 1.0;
  o.start_epoch = 2;
  o.end_epoch = 5;
  // Normal approximation: half of a normal distribution's |w| lie within 0.6745 std.
  auto s = suggest_schedule(table, o);
  EXPECT_NE(s.yaml.find("a.weight: 0.6745  # sparsity 0.50, s normal approximation"),
            std::string::npos)
      << s.yaml;
  EXPECT_NE(s.yaml.find("starting_epoch: 2\n    ending_epoch: 3\n"), std::string::npos) << s.yaml;
  // From the weights: |w| of 1..8 (std of ±1..±8 with alternating signs), median |w| 4.5.
  auto w = torch::tensor({1., -2., 3., -4., 5., -6., 7., -8.});
  o.weights["a.weight"] = w;
  s = suggest_schedule(table, o);
  const double expected = 4.5 / w.std().item<double>();
  char buf[32];
  std::snprintf(buf, sizeof buf, "a.weight: %.4f", expected);
  EXPECT_NE(s.yaml.find(buf), std::string::npos) << s.yaml;
  EXPECT_NE(s.yaml.find("s from the weights"), std::string::npos);

  o.metric = "top3";
  EXPECT_THROW(suggest_schedule(table, o), InputError);
  o.metric = "";
  o.end_epoch = 2;
  EXPECT_THROW(suggest_schedule(table, o), InputError);
  write_text_atomically(tmp.path() / "bad.csv", "parameter,sparsity,top1\na,0.1,x\n");
  try {
    read_sensitivity_csv(tmp.path() / "bad.csv");
    ADD_FAILURE() << "read a malformed table";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv:2: 'x' is not a number"), std::string::npos)
        << e.what();
  }
  write_text_atomically(tmp.path() / "nozero.csv", "parameter,sparsity,top1\na,0.1,1\n");
  o.end_epoch = 5;
  EXPECT_THROW(suggest_schedule(read_sensitivity_csv(tmp.path() / "nozero.csv"), o), InputError);
}

}  // namespace igb::tools
