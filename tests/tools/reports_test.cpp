#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "models/model.h"
#include "tests/support.h"
#include "tests/tools/tools_support.h"
#include "tools/draw.h"
#include "tools/macs.h"
#include "tools/profile.h"
#include "tools/sparsity.h"

namespace igb::tools {

namespace fs = std::filesystem;

namespace {

MacsSummary macs_of(const std::string& name, nlohmann::json opts = nlohmann::json::object(),
                    graph::Shape input = {}) {
  auto m = make(name, opts);
  return compute_macs(graph_of(m, name, input), *m);
}

}  // namespace

// The published parameters and MACs (torchvision, Distiller, Li et al. 2016) (batch 1) of each
// model, exactly.
TEST(Macs, TotalsMatchTheReferenceTable) {
  struct Row {
    std::string model;
    int64_t params, macs;
  };
  const std::vector<Row> rows = {
      {"resnet18", 11'689'512, 1'814'073'344}, {"resnet34", 21'797'672, 3'663'761'408},
      {"resnet50", 25'557'032, 4'089'184'256}, {"vgg16", 138'357'544, 15'470'264'320},
      {"alexnet", 61'100'840, 714'188'480},    {"mobilenet_v2", 3'504'872, 300'774'272},
      {"resnet20_cifar", 269'722, 40'551'040}, {"resnet56_cifar", 853'018, 125'485'696},
      {"vgg16_cifar", 14'991'946, 313'463'808}};
  for (const auto& row : rows) {
    auto s = macs_of(row.model);
    EXPECT_EQ(s.total_params, row.params) << row.model;
    EXPECT_EQ(s.total_macs, row.macs) << row.model;
    if (row.model == "resnet18") {
      EXPECT_EQ(s.input, (graph::Shape{1, 3, 224, 224}));
    }
  }
}

// The DeblurGAN generator (Kupyn et al. 2018) at 256×256, 49.55 GMACs. By hand: the 7×7 convs
// 2 · 64·3·49 · 256² = 1,233,125,376; the stride-2 convs 128·64·9 · 128² + 256·128·9 · 64²
// = 2,415,919,104; the 18 block convs 18 · 256·256·9 · 64² = 43,486,543,872; the transposed
// convs, per input pixel, 256·128·9 · 64² + 128·64·9 · 128² = 2,415,919,104.
TEST(Macs, DeblurGanGeneratorAndCriticAt256) {
  auto g = macs_of("deblurgan", {}, {1, 3, 256, 256});
  EXPECT_EQ(g.total_params, 11'378'179);
  EXPECT_EQ(g.total_macs, 49'551'507'456);
  EXPECT_EQ(g.layers.size(), 24u);
  // PatchGAN: 64·3·16 · 128² + 128·64·16 · 64² + 256·128·16 · 32² + 512·256·16 · 31²
  // + 1·512·16 · 30².
  auto d = macs_of("patchgan", {}, {1, 3, 256, 256});
  EXPECT_EQ(d.total_params, 2'764'737);
  EXPECT_EQ(d.total_macs, 3'146'809'344);
}

TEST(Macs, SimplenetPerLayerMatchesDistiller) {
  auto s = macs_of("simplenet_cifar");
  std::vector<int64_t> macs;
  std::vector<std::string> names;
  for (const auto& l : s.layers) {
    macs.push_back(l.macs);
    names.push_back(l.name);
  }
  EXPECT_EQ(macs, (std::vector<int64_t>{352800, 240000, 48000, 10080, 840}));
  EXPECT_EQ(names, (std::vector<std::string>{"conv1", "conv2", "fc1", "fc2", "fc3"}));
  EXPECT_EQ(s.layers[0].weights, (graph::Shape{6, 3, 5, 5}));
  EXPECT_EQ(s.layers[0].params, 6 * 3 * 25 + 6);
  EXPECT_EQ(s.layers[2].ifm, (graph::Shape{1, 400}));
}

// FSRCNN x3 on a 1x1x20x30 input, by hand: the transposed conv costs Cin·Cout·k² per input pixel.
TEST(Macs, FsrcnnCountsItsTransposedConvolution) {
  auto s = macs_of("fsrcnn", {{"scale", 3}}, {1, 1, 20, 30});
  const int64_t px = 20 * 30;
  const int64_t d = 56, sh = 12, m = 4;
  const int64_t feature = px * d * 1 * 25;
  const int64_t shrink = px * sh * d;
  const int64_t mapping = m * px * sh * sh * 9;
  const int64_t expand = px * d * sh;
  const int64_t deconv = px * d * 1 * 81;
  ASSERT_EQ(s.layers.back().type, "ConvTranspose");
  EXPECT_EQ(s.layers.back().macs, deconv);
  EXPECT_EQ(s.layers.back().ofm, (graph::Shape{1, 1, 60, 90}));
  EXPECT_EQ(s.total_macs, feature + shrink + mapping + expand + deconv);
  EXPECT_EQ(s.total_macs, 7'478'400);  // 600 · (1400 + 672 + 5184 + 672 + 4536)
}

TEST(Macs, ReportTableAndJson) {
  auto r = macs_report(macs_of("simplenet_cifar"));
  EXPECT_EQ(r.table.columns.size(), 9u);
  EXPECT_EQ(r.table.rows.front()[0], "conv1");
  EXPECT_EQ(r.table.rows.front()[3], "1x3x32x32");
  EXPECT_EQ(r.table.rows.back()[0], "Total");
  EXPECT_EQ(r.table.rows.back()[8], "651720");
  EXPECT_EQ(r.json["total_macs"].get<int64_t>(), 651720);
  EXPECT_EQ(r.json["total_params"].get<int64_t>(), 62006);
  EXPECT_EQ(r.json["layers"][1]["name"], "conv2");
  EXPECT_EQ(r.json["layers"][1]["ofm"], (graph::Shape{1, 16, 10, 10}));
}

TEST(Sparsity, StructureColumnsOnConstructedTensors) {
  // 4 filters x 3 channels x 2x2: filter 0 all zero, input channel 1 zero in every filter, and one
  // more zero in filter 2 channel 0.
  auto w = torch::arange(1, 49, torch::kFloat).reshape({4, 3, 2, 2});
  w[0].zero_();
  w.select(1, 1).zero_();
  w[2][0][0][0] = 0;
  auto s = tensor_sparsity("conv.weight", w);
  EXPECT_EQ(s.dense, 48);
  EXPECT_EQ(s.nnz,
            48 - 12 - 3 * 4 - 1);  // filter 0, channel 1 of the other three filters, one weight
  EXPECT_DOUBLE_EQ(s.filters, 25.0);
  EXPECT_NEAR(s.channels, 100.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.kernels, 100.0 * 6.0 / 12.0);  // 3 kernels of filter 0 + channel 1 of 3 others
  EXPECT_NEAR(s.fine, 100.0 * 25.0 / 48.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.cols, 0);
  // Statistics in double precision: 707/48 for the mean (of 1..48 minus the zeroed weights).
  const auto wd = w.to(torch::kDouble);
  EXPECT_NEAR(s.mean, 707.0 / 48.0, 1e-12);
  EXPECT_NEAR(s.mean, wd.mean().item<double>(), 1e-12);
  EXPECT_NEAR(s.std, wd.std().item<double>(), 1e-12);
  EXPECT_NEAR(s.abs_mean, wd.abs().mean().item<double>(), 1e-12);

  // [out=3, in=4]: output row 1 zero, input column 2 zero.
  auto fc = torch::ones({3, 4});
  fc[1].zero_();
  fc.select(1, 2).zero_();
  auto f = tensor_sparsity("fc.weight", fc);
  EXPECT_NEAR(f.cols, 100.0 / 3.0, 1e-12);  // Distiller's "Cols" of the transposed matrix
  EXPECT_DOUBLE_EQ(f.rows, 25.0);
  EXPECT_NEAR(f.kernels, 100.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(f.filters, 0);
  EXPECT_EQ(f.nnz, 6);
}

TEST(Sparsity, ModelReportTotals) {
  auto m = make("simplenet_cifar");
  {
    torch::NoGradGuard no_grad;
    m->named_parameters()["conv1.weight"].zero_();
  }
  auto params = model_sparsity(*m);
  ASSERT_EQ(params.size(), 5u);  // conv1, conv2, fc1, fc2, fc3 weights; no biases
  EXPECT_EQ(params[0].name, "conv1.weight");
  EXPECT_DOUBLE_EQ(params[0].fine, 100.0);
  auto r = sparsity_report(params, "simplenet_cifar");
  int64_t dense = 0;
  for (const auto& p : params) dense += p.dense;
  EXPECT_EQ(r.table.columns.size(), 13u);
  EXPECT_EQ(r.table.rows.back()[0], "Total sparsity:");
  EXPECT_NEAR(r.json["total_sparsity"].get<double>(), 100.0 * 450.0 / static_cast<double>(dense),
              1e-9);
  EXPECT_DOUBLE_EQ(r.json["params"][0]["filters"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(r.json["params"][0]["channels"].get<double>(), 100.0);
}

TEST(Draw, DotIsAcceptedByGraphvizAndPngDecodes) {
  auto m = make("resnet20_cifar");
  auto g = graph_of(m, "resnet20_cifar");
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  draw_graph(g, dir / "g.dot", true);
  const std::string dot = graph_to_dot(g, true);
  EXPECT_NE(dot.find("\"layer1.0.conv1\\nConv k=3x3 p=1x1\\n1x16x32x32\""), std::string::npos);
  EXPECT_NE(dot.find("layer1.0.conv1.weight\\n16x16x3x3"), std::string::npos);
  const std::string cmd = "dot -Tsvg " + (dir / "g.dot").string() + " -o " +
                          (dir / "check.svg").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "dot rejected the file";
  EXPECT_GT(fs::file_size(dir / "check.svg"), 1000u);

  draw_graph(g, dir / "g.png", false);
  std::ifstream in(dir / "g.png", std::ios::binary);
  std::vector<uchar> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  cv::Mat img = cv::imdecode(bytes, cv::IMREAD_COLOR);
  ASSERT_FALSE(img.empty());
  EXPECT_GT(img.rows, img.cols);  // a tall top-to-bottom drawing

  draw_graph(g, dir / "g.svg", false);
  std::ifstream svg(dir / "g.svg");
  std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("layer3.2.add"), std::string::npos);

  EXPECT_THROW(draw_graph(g, dir / "g.jpg", false), InputError);
  EXPECT_FALSE(fs::exists(dir / "g.jpg"));
}

TEST(Profile, PerLayerCostsOperatorsAndTrace) {
  auto m = make("simplenet_cifar");
  auto before = m->named_parameters()["conv1.weight"].clone();
  ProfileOptions o;
  o.batch_sizes = {1, 4};
  o.warmup = 0;
  o.repeats = 1;
  auto p = profile_model(
      *m, m->input_shape(), [&](const torch::Tensor& x) { return m->forward(x); },
      "simplenet_cifar", o);
  ASSERT_EQ(p.batches.size(), 2u);
  const auto& b4 = p.batches[1];
  EXPECT_EQ(b4.batch, 4);
  auto g = graph_of(m, "simplenet_cifar");
  ASSERT_EQ(b4.layers.size(), g.ops().size());
  EXPECT_EQ(b4.layers[0].name, "conv1");
  EXPECT_EQ(b4.layers[0].output, (graph::Shape{4, 6, 28, 28}));
  EXPECT_EQ(b4.layers[0].output_bytes, 4 * 6 * 28 * 28 * 4);
  EXPECT_EQ(p.batches[0].layers[0].output_bytes, 6 * 28 * 28 * 4);
  for (const auto& l : b4.layers) {
    EXPECT_GT(l.forward_ms, 0) << l.name;
    EXPECT_GE(l.forward_backward_ms, 0) << l.name;
  }
  EXPECT_GT(b4.forward_ms, 0);
  EXPECT_GT(b4.forward_backward_ms, 0);
  bool conv_seen = false;
  for (const auto& s : b4.operators) {
    EXPECT_GE(s.total_us, s.self_us - 1e-9) << s.name;
    EXPECT_GT(s.calls, 0);
    if (s.name.find("convolution") != std::string::npos) conv_seen = true;
  }
  EXPECT_TRUE(conv_seen);
  int layers = 0;
  for (const auto& e : p.chrome_trace["traceEvents"])
    if (e.value("cat", "") == "layer") ++layers;
  EXPECT_EQ(layers, static_cast<int>(2 * g.ops().size()));
  auto reports = profile_reports(p, 3);
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_EQ(reports[1].table.rows.size(), 3u);
  auto j = profile_json(p);
  EXPECT_EQ(j["batches"][1]["layers"][0]["output_bytes"].get<int64_t>(), 4 * 6 * 28 * 28 * 4);
  // The model is left as it was.
  EXPECT_TRUE(m->is_training());
  EXPECT_TRUE(torch::equal(before, m->named_parameters()["conv1.weight"]));
  for (const auto& param : m->parameters()) EXPECT_FALSE(param.grad().defined());
}

}  // namespace igb::tools
