#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <random>

#include "core/error.h"
#include "core/fs.h"
#include "deploy/early_exit/exit_calibration.h"
#include "deploy/early_exit/exit_export.h"
#include "deploy/early_exit/exit_network.h"
#include "deploy/onnx/onnx_runtime.h"
#include "graph/summary_graph.h"
#include "models/classify/early_exit.h"
#include "models/model.h"
#include "tests/support.h"

namespace igb::deploy {
namespace {

models::Model exit_model(const std::string& name) {
  models::register_builtin_models();
  torch::manual_seed(0);
  auto m = models::create_model(name, {});
  m->eval();
  return m;
}

graph::SummaryGraph exit_graph(models::Model& m) {
  return graph::SummaryGraph::build(
      *m, {1, 3, 32, 32}, [&](const torch::Tensor& x) { return m->forward(x); }, "ee");
}

/// resnet20_cifar with two exits: Distiller's after layer1 and one after layer2.2.relu2 (whose
/// output the next block's shortcut also reads).
models::Model two_exit_resnet() {
  auto m = exit_model("resnet20_cifar");
  auto exits = models::classify::distiller_resnet_cifar_exits(10, 32);
  torch::nn::Sequential head2(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions(2)),
                              torch::nn::Flatten(), torch::nn::Linear(32 * 4, 10));
  exits.push_back({"layer2.2.relu2", head2});
  models::classify::attach_exits(*m, exits);
  m->eval();
  return m;
}

/// The first exit whose score reaches its threshold, from every exit's logits.
std::vector<int64_t> first_confident(const std::vector<at::Tensor>& all, ExitCriterion c,
                                     const std::vector<double>& th, const at::Tensor& target) {
  const int64_t n = all[0].size(0);
  std::vector<int64_t> out(static_cast<size_t>(n), static_cast<int64_t>(all.size() - 1));
  for (int64_t i = 0; i < n; ++i)
    for (size_t e = 0; e + 1 < all.size(); ++e)
      if (exit_scores(all[e], c, target)[i].item<double>() >= th[e]) {
        out[static_cast<size_t>(i)] = static_cast<int64_t>(e);
        break;
      }
  return out;
}

TEST(ExitNetwork, SegmentsCostWhatTheirLayersAndHeadsDo) {
  auto m = exit_model("resnet20_cifar_earlyexit");
  const auto g = exit_graph(m);
  ExitNetwork net(*m, g);
  ASSERT_EQ(net.exits(), 2u);
  EXPECT_EQ(net.exit_names()[0], "layer1.2.relu2");
  // conv1 (3→16, 3×3, 32×32) and layer1's six 16→16 convs, then the head's Linear(1600, 10).
  const int64_t conv1 = 16 * 32 * 32 * 3 * 9, conv16 = 16 * 32 * 32 * 16 * 9;
  EXPECT_EQ(net.head_macs()[0], 1600 * 10);
  EXPECT_EQ(net.exit_macs()[0], conv1 + 6 * conv16 + 1600 * 10);
  EXPECT_EQ(net.exit_macs()[1], g.total_macs() + 1600 * 10);
  EXPECT_EQ(net.model_macs(), g.total_macs());
}

TEST(ExitNetwork, RunAllGivesTheModelsExitsAndOutput) {
  auto m = exit_model("resnet20_cifar_earlyexit");
  const auto g = exit_graph(m);
  ExitNetwork net(*m, g);
  torch::NoGradGuard no_grad;
  const auto x = torch::rand({6, 3, 32, 32});
  const auto all = net.run_all(x);
  const auto ref = models::classify::forward_exits(
      *m, [&](const at::Tensor& t) { return m->forward(t); }, x);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(torch::allclose(all[0], ref[0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(all[1], ref[1], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(net.run_final_only(x), m->forward(x), 1e-5, 1e-5));
}

TEST(ExitNetwork, SkippingDecisionsEqualEveryExitThenTheFirstConfidentOne) {
  auto m = two_exit_resnet();
  const auto g = exit_graph(m);
  ExitNetwork net(*m, g);
  ASSERT_EQ(net.exits(), 3u);
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  const auto x = torch::rand({24, 3, 32, 32});
  const auto target = torch::randint(0, 10, {24}, torch::kLong);
  const auto all = net.run_all(x);
  for (auto c : {ExitCriterion::kMaxSoftmax, ExitCriterion::kEntropy, ExitCriterion::kLabelLoss}) {
    // Each threshold at a quantile of its exit's scores, so every exit takes some samples.
    const std::vector<double> th = {exit_scores(all[0], c, target).quantile(0.7).item<double>(),
                                    exit_scores(all[1], c, target).quantile(0.5).item<double>()};
    const auto expected = first_confident(all, c, th, target);
    const auto d = net.run(x, c, th, target);
    std::vector<int64_t> counts(3, 0);
    for (int64_t i = 0; i < 24; ++i) {
      const auto e = d.exit[i].item<int64_t>();
      ASSERT_EQ(e, expected[static_cast<size_t>(i)]) << exit_criterion_name(c) << " sample " << i;
      ++counts[static_cast<size_t>(e)];
      EXPECT_TRUE(torch::allclose(d.logits[i], all[static_cast<size_t>(e)][i], 1e-5, 1e-5));
    }
    EXPECT_GT(counts[0], 0) << exit_criterion_name(c);
    EXPECT_GT(counts[1], 0) << exit_criterion_name(c);
    EXPECT_GT(counts[2], 0) << exit_criterion_name(c);
  }
}

TEST(ExitNetwork, LabelLossRuleTakesTheSamplesDistillersReportCounts) {
  auto m = exit_model("resnet20_cifar_earlyexit");
  const auto g = exit_graph(m);
  ExitNetwork net(*m, g);
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  const auto x = torch::rand({32, 3, 32, 32});
  const auto target = torch::randint(0, 10, {32}, torch::kLong);
  const auto all = net.run_all(x);
  const double t =
      (-exit_scores(all[0], ExitCriterion::kLabelLoss, target)).median().item<double>();
  models::classify::DistillerExitStats stats(1, {t + 1e-6});
  stats.add(all, target);
  const auto d = net.run(x, ExitCriterion::kLabelLoss,
                         {score_threshold(ExitCriterion::kLabelLoss, t)}, target);
  EXPECT_EQ(d.exit.eq(0).sum().item<int64_t>(), stats.exits()[0].taken);
}

TEST(ExitNetwork, ASegmentRunWithoutItsInputNamesTheOpAndTheValue) {
  auto m = exit_model("resnet20_cifar_earlyexit");
  const auto g = exit_graph(m);
  ExitNetwork net(*m, g);
  StageRunner second(g, net.segments().at(1));
  std::map<int, at::Tensor> values;
  try {
    second.run(values);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("that the stage was not given"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("layer2.0"), std::string::npos) << e.what();
  }
}

/// A threshold halfway between two neighbouring scores near quantile `q`, so that the float
/// differences of another runtime cannot move a sample across it.
double gap_threshold(const at::Tensor& scores, double q) {
  const auto sorted = std::get<0>(scores.sort());
  const auto i = static_cast<int64_t>(q * static_cast<double>(sorted.numel() - 1));
  return 0.5 * (sorted[i].item<double>() + sorted[i + 1].item<double>());
}

TEST(ExitSegments, ChainedOnnxSegmentsDecideAsTheEvaluator) {
  auto m = two_exit_resnet();
  const auto g = exit_graph(m);
  ExitNetwork net(*m, g);
  torch::NoGradGuard no_grad;
  torch::manual_seed(9);
  const auto x = torch::rand({16, 3, 32, 32});
  const auto all = net.run_all(x);
  const auto c = ExitCriterion::kMaxSoftmax;
  const std::vector<double> th = {gap_threshold(exit_scores(all[0], c), 0.6),
                                  gap_threshold(exit_scores(all[1], c), 0.4)};
  const auto expected = net.run(x, c, th);
  test::TempDir tmp;
  const auto manifest =
      export_exit_segments(*m, g, net, c, th, OnnxExportOptions().dynamic_batch(true), tmp.path());
  ASSERT_EQ(manifest["segments"].size(), 3u);
  EXPECT_EQ(manifest["segments"][0]["exit"]["output"], "exit0");
  EXPECT_NEAR(manifest["segments"][1]["exit"]["threshold"].get<double>(), th[1], 1e-12);
  EXPECT_EQ(manifest["segments"][0]["exit"]["macs_to_leave"], net.exit_macs()[0]);
  // What a cascade unit reads of the file the exporter wrote (igb-serve worker --cascade).
  const auto read = read_segments_manifest(tmp.path() / "manifest.json");
  ASSERT_EQ(read.thresholds.size(), 3u);
  EXPECT_NEAR(*read.thresholds[0], natural_threshold(c, th[0]), 1e-12);
  EXPECT_NEAR(*read.thresholds[1], natural_threshold(c, th[1]), 1e-12);
  EXPECT_FALSE(read.thresholds[2].has_value());
  EXPECT_EQ(read.criterion, c);
  EXPECT_EQ(read.input, g.input_shape());
  auto broken = manifest;
  broken["segments"][1]["exit"].erase("threshold");
  write_text_atomically(tmp.path() / "broken.json", broken.dump());
  try {
    read_segments_manifest(tmp.path() / "broken.json");
    ADD_FAILURE() << "a segment without a threshold was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("manifest.segments[1].exit.threshold is missing"),
              std::string::npos)
        << e.what();
  }
  // The chain as a server runs it: each segment on the samples still undecided.
  std::map<std::string, at::Tensor> values{{"input", x}};
  at::Tensor rows = torch::arange(16, torch::kLong);
  std::vector<int64_t> exit_of(16, -1);
  at::Tensor logits = torch::zeros({16, 10});
  try {
    for (const auto& s : manifest["segments"]) {
      std::vector<std::pair<std::string, at::Tensor>> ins;
      for (const auto& i : s["inputs"])
        ins.emplace_back(i["name"].get<std::string>(), values.at(i["name"].get<std::string>()));
      OnnxRuntimeRunner ort(tmp.path() / s["file"].get<std::string>(),
                            tmp.path() / ("work" + s["segment"].dump()));
      for (auto& [name, t] : ort.run_named(ins)) values[name] = t;
      const auto z = values.at(s["exit"]["output"].get<std::string>());
      const auto leave = s["exit"]["final"].get<bool>()
                             ? torch::ones({z.size(0)}, torch::kBool)
                             : exit_scores(z, c).ge(s["exit"]["threshold"].get<double>());
      for (int64_t i = 0; i < z.size(0); ++i)
        if (leave[i].item<bool>()) {
          exit_of[static_cast<size_t>(rows[i].item<int64_t>())] = s["segment"].get<int64_t>();
          logits[rows[i].item<int64_t>()] = z[i];
        }
      const auto stay = leave.logical_not().nonzero().flatten();
      rows = rows.index_select(0, stay);
      for (auto& [name, t] : values) t = t.index_select(0, stay);
    }
  } catch (const InputError& e) {
    FAIL() << e.what();
  }
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(exit_of[static_cast<size_t>(i)], expected.exit[i].item<int64_t>()) << i;
  EXPECT_LT((logits - expected.logits).abs().max().item<double>(), 1e-4);
}

TEST(ExitNetwork, AModelWithoutExitsIsRefused) {
  auto m = exit_model("resnet20_cifar");
  const auto g = exit_graph(m);
  EXPECT_THROW(ExitNetwork(*m, g), InputError);
  EXPECT_THROW(parse_exit_criterion("confidence"), InputError);
}

/// A random table of one or two early exits whose confidence tracks correctness.
ExitTable random_table(size_t samples, size_t early, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  ExitTable t;
  t.score.resize(early + 1);
  t.correct.resize(early + 1);
  for (size_t i = 0; i < samples; ++i) {
    const float difficulty = u(rng);
    for (size_t e = 0; e <= early; ++e) {
      const float skill = 0.55f + 0.4f * static_cast<float>(e) / static_cast<float>(early);
      const bool right = u(rng) < skill * (1.2f - difficulty);
      t.correct[e].push_back(right ? 1 : 0);
      t.score[e].push_back((right ? 0.6f : 0.3f) + 0.4f * u(rng) - 0.2f * difficulty);
    }
  }
  for (size_t e = 0; e <= early; ++e) t.macs.push_back(static_cast<int64_t>(100 * (e + 1)));
  t.model_macs = t.macs.back();
  return t;
}

TEST(ExitCalibration, OneExitFindsTheCheapestThresholdWithinTheDrop) {
  const auto t = random_table(400, 1, 7);
  const double base = final_top1(t);
  const auto cal = calibrate(t, {CalibrationTarget::Kind::kAccuracyDrop, 1.0});
  ASSERT_TRUE(cal.met);
  EXPECT_GE(cal.point.top1, base - 1.0);
  // Brute force over every score as a threshold: none meeting the drop costs less.
  for (float s : t.score[0]) {
    const auto p = operating_point(t, {static_cast<double>(s)});
    if (p.top1 >= base - 1.0) EXPECT_GE(p.mean_macs, cal.point.mean_macs - 1e-9);
  }
  EXPECT_GT(cal.point.share[0], 0);
}

TEST(ExitCalibration, TargetsAreMetOnTheCalibrationSetAndReportedOnAnother) {
  const auto cal_set = random_table(600, 2, 11), report_set = random_table(600, 2, 12);
  const auto drop = calibrate(cal_set, {CalibrationTarget::Kind::kAccuracyDrop, 2.0});
  ASSERT_TRUE(drop.met);
  EXPECT_GE(drop.point.top1, final_top1(cal_set) - 2.0);
  EXPECT_LT(drop.point.mean_macs, 300.0);
  const auto macs = calibrate(cal_set, {CalibrationTarget::Kind::kMacs, 0.6});
  ASSERT_TRUE(macs.met);
  EXPECT_LE(macs.point.mean_macs, 0.6 * 300.0 + 1e-9);
  // The thresholds carry to the other set, where the figures are what they are.
  const auto reported = operating_point(report_set, drop.point.thresholds);
  EXPECT_NEAR(reported.share[0] + reported.share[1] + reported.share[2], 100.0, 1e-9);
  // A target nothing meets says so.
  const auto impossible = calibrate(cal_set, {CalibrationTarget::Kind::kMacs, 0.2});
  EXPECT_FALSE(impossible.met);
  EXPECT_THROW(calibrate(cal_set, {CalibrationTarget::Kind::kMacs, 1.5}), InputError);
}

TEST(ExitCalibration, TheSweepRunsFromEveryoneEarlyToNobodyEarly) {
  const auto t = random_table(300, 1, 5);
  const auto curve = threshold_sweep(t, 51);
  ASSERT_GE(curve.size(), 10u);
  EXPECT_DOUBLE_EQ(curve.front().share[0], 100.0);
  EXPECT_DOUBLE_EQ(curve.back().share[0], 0.0);
  EXPECT_DOUBLE_EQ(curve.back().top1, final_top1(t));
  for (size_t i = 1; i < curve.size(); ++i)
    EXPECT_GE(curve[i].mean_macs, curve[i - 1].mean_macs - 1e-9);
}

}  // namespace
}  // namespace igb::deploy
