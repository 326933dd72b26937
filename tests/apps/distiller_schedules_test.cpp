// The Distiller-format schedules shipped in schedules/distiller/ run unchanged on the zoo's
// Distiller-named models for a few epochs on small synthetic data, and do what their comments
// say: `module.` names resolve, thinning happens in the epoch the schedule names, with the MACs
// Distiller publishes or that the layer arithmetic gives. The quantization schedules (DoReFa, PACT,
// symmetric INT8 QAT) in schedules/distiller/, schedules/classify/ and schedules/sr/ run unchanged
// too, keeping in full precision the layers their overrides name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/apps/run_support.h"
#include "tests/support.h"

namespace {

namespace fs = std::filesystem;

struct ScheduleCase {
  const char* schedule;  // file name in schedules/distiller/, without .yaml
  const char* args;      // model and run length
  int thinning_epoch;    // -1: the schedule does not thin
  int64_t macs_before;   // when thinning: the dense model's MACs (0: not checked)
  int64_t macs_after;    // when thinning: the thin model's MACs (0: only "fewer")
  bool sparse;           // the last epoch has zeroed weights
};

// Layer arithmetic of the expected MACs (3x3 convs: k·c_in·9·HW per conv, BN not counted).
//
// resnet20_cifar, shortcut=conv: Distiller's own result for its resnet20 filter-AGP schedule
// (examples/agp-pruning/resnet20_filters.schedule_agp.yaml, "Total MACs: 30,655,104" from
// 40,813,184), which prunes layer2's filters to 50% as this schedule does.
//
// resnet56_cifar channel ranking removes conv1 filters (= conv2 input channels) per block:
//   layer1 blocks 0-6: floor(0.6·16) = 9 of 16, HW 32·32: 2·9·16·9·1024 = 2,654,208 each, ×7
//   layer2 blocks 1-6: floor(0.3·32) = 9 of 32, HW 16·16: 2·9·32·9·256  = 1,327,104 each, ×6
//   layer3 blocks 1-4: floor(0.1·64) = 6 of 64, HW 8·8:   2·6·64·9·64   =   442,368 each, ×4
//   125,485,696 − (18,579,456 + 7,962,624 + 1,769,472) = 97,174,144
//
// resnet18 at 32×32 (stem to 16×16, max-pool to 8×8; stages at 8, 4, 2, 1 pixels a side):
// removing k conv1 filters of a block saves k·c_in·9·HW + c_out·k·9·HW:
//   layer1.0/1: k 12 (20% of 64), c_in 64, c 64, HW 64:  2 · (12·64·9·64 + 64·12·9·64)
//                                                          = 1,769,472
//   layer2.0:   k 25, c_in 64,  c 128, HW 16: 25·64·9·16 + 128·25·9·16   =   691,200
//   layer2.1:   k 25, c_in 128, c 128, HW 16: 2 · 128·25·9·16             =   921,600
//   layer3.0:   k 102 (40% of 256), c_in 128, c 256, HW 4: 470,016 + 940,032 = 1,410,048
//   layer3.1:   k 102, c_in 256, c 256, HW 4: 2 · 256·102·9·4             = 1,880,064
//   layer4.0:   k 204 (40% of 512), c_in 256, c 512, HW 1: 470,016 + 940,032 = 1,410,048
//   layer4.1:   k 204, c_in 512, c 512, HW 1: 2 · 512·204·9               = 1,880,064
//   together 9,962,496 fewer MACs. Dense, with 10 classes: igb-tools macs gives 37,523,456 with
//   ImageNet's 1000 classes, less 512·990 in the fc: 37,016,576.
constexpr int64_t kResnet18At32 = 37'016'576;

const ScheduleCase kCases[] = {
    {"resnet20_cifar_filters_agp", "--model resnet20_cifar --model-arg shortcut=conv --epochs 5", 4,
     40'813'184, 30'655'104, true},
    // The same with BN-folded ranking (fold_batchnorm), in Distiller's own epochs: layer2's
    // filters are thinned at epoch 30, to the same count and so the same MACs.
    {"resnet20_cifar_filters_bn_fold_agp",
     "--model resnet20_cifar --model-arg shortcut=conv --epochs 32", 30, 40'813'184, 30'655'104,
     true},
    {"resnet20_cifar_network_surgery",
     "--model resnet20_cifar --model-arg shortcut=conv --epochs 8", -1, 0, 0, true},
    {"resnet56_cifar_channel_rank", "--model resnet56_cifar --epochs 2", 1, 125'485'696, 97'174'144,
     false},
    {"resnet56_cifar_apoz", "--model resnet56_cifar --epochs 6", 5, 125'485'696, 0, false},
    {"vgg16_cifar_group_lasso", "--model vgg16_cifar --model-arg layout=distiller --epochs 5", 4,
     313'201'664, 0, false},
    {"alexnet_agp", "--model alexnet --input-size 64 --epochs 1", -1, 0, 0, true},
    {"resnet18_filter_rank", "--model resnet18 --input-size 32 --epochs 2", 1, kResnet18At32,
     kResnet18At32 - 9'962'496, false},
    {"resnet50_filters_agp", "--model resnet50 --input-size 32 --epochs 5", 4, 0, 0, true},
};

class DistillerSchedules : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(DistillerSchedules, RunUnchanged) {
  const ScheduleCase& c = GetParam();
  igb::test::TempDir tmp;
  const fs::path out = tmp / "run";
  const std::string schedule =
      std::string(IGB_SOURCE_DIR) + "/schedules/distiller/" + c.schedule + ".yaml";
  const auto r = igb::test::run_app(
      "igb-train --optform=classify " + std::string(c.args) +
      " --synthetic-train 32 --synthetic-val 16 --batch-size 8 --max-batches 2 --lr 0.01"
      " --threads 1 --compress " +
      schedule + " --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("error"), std::string::npos) << r.output;
  // Every schedule names its weights as Distiller does, with a `module` path segment.
  EXPECT_NE(r.output.find("module"), std::string::npos) << r.output;

  std::ifstream in(out / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  if (c.thinning_epoch < 0) {
    EXPECT_FALSE(summary.contains("thinning")) << summary.dump(2);
  } else {
    ASSERT_TRUE(summary.contains("thinning")) << summary.dump(2);
    const auto& t = summary["thinning"][0];
    EXPECT_EQ(t["epoch"], c.thinning_epoch);
    if (c.macs_before > 0) {
      EXPECT_EQ(t["macs_before"], c.macs_before);
    }
    if (c.macs_after > 0) {
      EXPECT_EQ(t["macs_after"], c.macs_after);
    } else if (std::string(c.schedule) != "vgg16_cifar_group_lasso") {
      EXPECT_LT(t["macs_after"].get<int64_t>(), t["macs_before"].get<int64_t>());
    }
  }
  if (c.sparse) {
    EXPECT_GT(summary["sparsity"].get<double>(), 0.0) << summary.dump(2);
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, DistillerSchedules, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.schedule); });

struct QuantCase {
  const char* schedule;  // path under schedules/, without .yaml
  bool sr;               // --optform=sr on a tiny FSRCNN; else classify on synthetic images
  const char* args;      // model and run length
  int epochs;            // rows expected in metrics.csv
  const char* column;    // a metrics.csv column the run must log (nullptr: none checked)
  const char* floating;  // a column it must not log: a ReLU its overrides keep in full precision
  bool alpha;            // metrics.csv has PACT's alpha columns
};

// quantizer.py replacement_factory maps nn.ReLU only, so PACT on FSRCNN (PReLU) has no alpha, and
// DoReFa's clamp(x, 0, 1) slots have nothing to log; clipped_linear.py PACTQuantizer gives every
// replaced ReLU its own clip_val (alpha), range_linear.py FakeLinearQuantization tracks the range.
// alexnet_bn runs one epoch of one minibatch: its 9216x4096 fc makes each step slow.
const QuantCase kQuantCases[] = {
    {"sr/fsrcnn_dorefa", true, "--epochs 2 --max-batches 2", 2, nullptr, nullptr, false},
    {"sr/fsrcnn_pact", true, "--epochs 2 --max-batches 2", 2, nullptr, nullptr, false},
    {"sr/fsrcnn_dorefa_4bit", true, "--epochs 2 --max-batches 2", 2, nullptr, nullptr, false},
    {"classify/resnet20_pact", false, "--model resnet20_cifar --epochs 2 --max-batches 2", 2,
     "alpha/layer1.0.relu1", "alpha/layer3.2.relu2", true},
    {"classify/resnet20_int8_qat", false, "--model resnet20_cifar --epochs 2 --max-batches 2", 2,
     "act_amax/relu", nullptr, false},
    {"distiller/preact_resnet20_cifar_dorefa", false,
     "--model preact_resnet20_cifar --epochs 2 --max-batches 2", 2, nullptr, nullptr, false},
    {"distiller/preact_resnet20_cifar_pact", false,
     "--model preact_resnet20_cifar --epochs 2 --max-batches 2", 2, "alpha/layer1.1.pre_relu",
     "alpha/layer1.0.pre_relu", true},
    {"distiller/alexnet_bn_dorefa", false,
     "--model alexnet_bn --input-size 67 --epochs 1 --max-batches 1", 1, nullptr, nullptr, false},
    {"distiller/alexnet_bn_pact", false,
     "--model alexnet_bn --input-size 67 --epochs 1 --max-batches 1", 1, "alpha/classifier.2",
     "alpha/classifier.5", true},
};

class QuantizationSchedules : public ::testing::TestWithParam<QuantCase> {};

TEST_P(QuantizationSchedules, RunUnchanged) {
  const QuantCase& c = GetParam();
  igb::test::TempDir tmp;
  const fs::path out = tmp / "run";
  const std::string optform =
      c.sr ? "--optform=sr --data synthetic --batch-size 4 --model-arg d=8 --model-arg s=4 "
             "--model-arg m=4"
           : "--optform=classify --synthetic-train 32 --synthetic-val 16 --batch-size 8";
  const auto r = igb::test::run_app("igb-train " + optform + " " + c.args +
                                    " --lr 0.01 --threads 1 --compress " + IGB_SOURCE_DIR +
                                    "/schedules/" + c.schedule + ".yaml --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("quantizer "), std::string::npos) << r.output;

  std::ifstream in(out / "metrics.csv");
  std::string header;
  std::getline(in, header);
  const auto has_column = [&](const std::string& name) {
    return ("," + header + ",").find("," + name + ",") != std::string::npos;
  };
  EXPECT_EQ(header.find("alpha/") != std::string::npos, c.alpha) << header;
  if (c.column != nullptr) {
    EXPECT_TRUE(has_column(c.column)) << header;
  }
  if (c.floating != nullptr) {
    EXPECT_FALSE(has_column(c.floating)) << header;
  }
  int rows = 0;
  for (std::string line; std::getline(in, line);) rows += line.empty() ? 0 : 1;
  EXPECT_EQ(rows, c.epochs);
}

INSTANTIATE_TEST_SUITE_P(Shipped, QuantizationSchedules, ::testing::ValuesIn(kQuantCases),
                         [](const auto& info) {
                           std::string name = info.param.schedule;
                           for (char& ch : name)
                             if (ch == '/') ch = '_';
                           return name;
                         });

}  // namespace

namespace {

// The metrics igb-test reports, from a run directory's summary.json or igb-test's
// test_summary.json.
nlohmann::json quant_rt_metrics(const fs::path& file) {
  const auto j = nlohmann::json::parse(std::ifstream(file));
  return {{"psnr", j.at("psnr")}, {"ssim", j.at("ssim")}};
}

// A quantization-aware schedule on SRCNN (whose activations are ReLUs, so they are replaced).
struct QuantRoundTrip {
  const char* name;
  const char* quantizer;  // the YAML of the quantizer instance `q`
};

const QuantRoundTrip kRoundTrips[] = {
    {"pact",
     "    class: PACTQuantizer\n    bits_activations: 4\n    bits_weights: 4\n"
     "    act_clip_init_val: 2.0\n    overrides:\n      conv3:\n        bits_weights: null\n"},
    {"int8_qat",
     "    class: QuantAwareTrainRangeLinearQuantizer\n    bits_activations: 8\n"
     "    bits_weights: 8\n    mode: SYMMETRIC\n    per_channel_wts: true\n"},
};

class QuantizedCheckpoints : public ::testing::TestWithParam<QuantRoundTrip> {};

// config.py:dict_config builds the quantizer and prepare_model() runs before the checkpoint's
// state_dict loads (apputils/checkpoint.py:load_checkpoint with a quantizer record), so a resumed
// or tested quantized model is the trained one: the float masters, the fake-quantized weights, the
// ReLU replacements with PACT's α and the range-linear EMA buffers all come back.
TEST_P(QuantizedCheckpoints, TestAndResumeRebuildTheQuantizedModelBitForBit) {
  igb::test::TempDir tmp;
  const fs::path schedule = tmp / "schedule.yaml";
  std::ofstream(schedule) << "version: 1\nquantizers:\n  q:\n"
                          << GetParam().quantizer
                          << "policies:\n  - quantizer:\n      instance_name: q\n"
                             "    starting_epoch: 0\n    ending_epoch: 3\n    frequency: 1\n";
  const std::string common =
      "--optform=sr --data synthetic --model srcnn --batch-size 4 --max-batches 2 --lr-decay none "
      "--threads 1 "
      "--workers 0 "
      "--compress " +
      schedule.string();
  const fs::path straight = tmp / "straight";
  const fs::path split = tmp / "split";
  auto a = igb::test::run_app("igb-train " + common + " --epochs 3 --out " + straight.string());
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_NE(a.output.find("quantizer "), std::string::npos) << a.output;
  auto b = igb::test::run_app("igb-train " + common + " --epochs 2 --out " + split.string());
  ASSERT_EQ(b.code, 0) << b.output;

  // igb-test on the last checkpoint computes what the run's last validation computed.
  auto t = igb::test::run_app("igb-test --optform=sr --threads 1 --checkpoint " +
                              (split / "checkpoint.ckpt").string() + " --out " +
                              (tmp / "test").string());
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_EQ(quant_rt_metrics(tmp / "test" / "test_summary.json"),
            quant_rt_metrics(split / "summary.json"));

  // Resuming for the third epoch ends exactly where three epochs in one go end.
  auto r = igb::test::run_app("igb-train " + common + " --epochs 3 --resume " +
                              (split / "checkpoint.ckpt").string() + " --out " + split.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(quant_rt_metrics(split / "summary.json"), quant_rt_metrics(straight / "summary.json"));
  // Every logged column but the epoch's wall time agrees: the learning rate, the training loss,
  // the validation metrics and α per replaced ReLU (PACT) or its tracked range (range-linear).
  const auto last_row = [](const fs::path& csv) {
    std::ifstream in(csv);
    std::string header, line, last;
    std::getline(in, header);
    while (std::getline(in, line))
      if (!line.empty()) last = line;
    return header + "\n" + last.substr(0, last.rfind(','));
  };
  const std::string row = last_row(straight / "metrics.csv");
  EXPECT_NE(row.find(GetParam().name == std::string("pact") ? "alpha/relu1" : "act_amax/relu1"),
            std::string::npos)
      << row;
  EXPECT_EQ(last_row(split / "metrics.csv"), row);
}

INSTANTIATE_TEST_SUITE_P(Srcnn, QuantizedCheckpoints, ::testing::ValuesIn(kRoundTrips),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
