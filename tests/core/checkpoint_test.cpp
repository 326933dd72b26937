#include "core/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/fs.h"
#include "tests/support.h"

namespace igb {

namespace fs = std::filesystem;

namespace {
struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t hidden = 5) {
    fc1 = register_module("fc1", torch::nn::Linear(3, hidden));
    bn = register_module("bn", torch::nn::BatchNorm1d(hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, 2));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(bn(fc1(x)))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};
TORCH_MODULE(Net);

class CheckpointTest : public ::testing::Test {
 protected:
  test::TempDir tmp_;
  fs::path dir_ = tmp_.path();
};
}  // namespace

TEST_F(CheckpointTest, RoundTripsModelOptimizerAndMeta) {
  torch::manual_seed(3);
  Net a;
  torch::optim::Adam opt(a->parameters(), torch::optim::AdamOptions(0.01));
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    a->forward(torch::randn({4, 3})).pow(2).sum().backward();
    opt.step();
  }
  CheckpointMeta meta;
  meta.optform = "sr";
  meta.model = "net";
  meta.model_options = {{"hidden", 5}};
  meta.epoch = 7;
  meta.best_metric = 31.5;
  meta.best_epoch = 6;
  meta.best_metric_name = "psnr";
  meta.schedule_text = "version: 1\n";
  save_checkpoint(dir_ / "a.ckpt", meta, {a.get(), &opt, nullptr, nullptr});
  EXPECT_FALSE(fs::exists(dir_ / ("a.ckpt.tmp")));

  auto ck = Checkpoint::load(dir_ / "a.ckpt");
  EXPECT_EQ(ck.meta().optform, "sr");
  EXPECT_EQ(ck.meta().model_options["hidden"], 5);
  EXPECT_EQ(ck.meta().epoch, 7);
  EXPECT_DOUBLE_EQ(ck.meta().best_metric, 31.5);
  EXPECT_EQ(ck.meta().schedule_text, "version: 1\n");

  torch::manual_seed(99);
  Net b;
  torch::optim::Adam opt_b(b->parameters(), torch::optim::AdamOptions(0.01));
  ck.load_model(*b);
  ASSERT_TRUE(ck.load_optimizer(opt_b));
  for (const auto& [name, t] : named_state(*a)) {
    bool found = false;
    for (const auto& [n2, t2] : named_state(*b))
      if (n2 == name) {
        found = true;
        EXPECT_TRUE(torch::equal(t, t2)) << name;
      }
    EXPECT_TRUE(found) << name;
  }
  // The same next step from both: optimizer moments were restored.
  torch::manual_seed(5);
  auto x = torch::randn({4, 3});
  opt.zero_grad();
  a->forward(x).pow(2).sum().backward();
  opt.step();
  opt_b.zero_grad();
  b->forward(x).pow(2).sum().backward();
  opt_b.step();
  EXPECT_TRUE(torch::equal(a->fc1->weight, b->fc1->weight));
}

TEST_F(CheckpointTest, ShapeMismatchNamesTheTensor) {
  Net a(5), b(6);
  save_checkpoint(dir_ / "a.ckpt", CheckpointMeta{}, {a.get(), nullptr, nullptr, nullptr});
  auto ck = Checkpoint::load(dir_ / "a.ckpt");
  try {
    ck.load_model(*b);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("'fc1.weight' has shape [5x3] but the model expects [6x3]"),
        std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointTest, TruncatedCorruptMissingAndForeignFilesAreInputErrors) {
  Net a;
  save_checkpoint(dir_ / "a.ckpt", CheckpointMeta{}, {a.get(), nullptr, nullptr, nullptr});
  auto size = fs::file_size(dir_ / "a.ckpt");
  fs::copy_file(dir_ / "a.ckpt", dir_ / "t.ckpt");
  fs::resize_file(dir_ / "t.ckpt", size / 2);
  EXPECT_THROW(Checkpoint::load(dir_ / "t.ckpt"), InputError);

  std::ofstream(dir_ / "g.ckpt") << "this is not an archive";
  EXPECT_THROW(Checkpoint::load(dir_ / "g.ckpt"), InputError);
  EXPECT_THROW(Checkpoint::load(dir_ / "missing.ckpt"), InputError);

  torch::serialize::OutputArchive foreign;
  foreign.write("x", torch::ones({2}));
  foreign.save_to((dir_ / "f.ckpt").string());
  try {
    Checkpoint::load(dir_ / "f.ckpt");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not an igb checkpoint"), std::string::npos);
  }
}

TEST_F(CheckpointTest, FailedWriteLeavesThePreviousFileIntact) {
  Net a;
  CheckpointMeta meta;
  meta.epoch = 1;
  save_checkpoint(dir_ / "a.ckpt", meta, {a.get(), nullptr, nullptr, nullptr});
  // A writer that dies half-way through its temporary file.
  EXPECT_THROW(write_atomically(dir_ / "a.ckpt",
                                [](const fs::path& tmp) {
                                  std::ofstream(tmp) << "partial";
                                  throw std::runtime_error("disk full");
                                }),
               std::runtime_error);
  EXPECT_EQ(Checkpoint::load(dir_ / "a.ckpt").meta().epoch, 1);
  int files = 0;
  for (auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

namespace {
nlohmann::json ck_quant_meta() {
  return {{"class", "PACTQuantizer"},
          {"act_clip_init_val", 8.0},
          {"bits",
           {{"conv1", {{"bits_activations", nullptr}, {"bits_weights", 3}, {"bits_bias", nullptr}}},
            {"relu", {{"bits_activations", 4}, {"bits_weights", nullptr}, {"bits_bias", nullptr}}},
            {"fc", {{"bits_activations", nullptr}, {"bits_weights", 8}, {"bits_bias", 8}}}}}};
}

/// The InputError message of CheckpointMeta::from_json on `j`, or "" when it is accepted.
std::string ck_meta_error(const nlohmann::json& j) {
  try {
    CheckpointMeta::from_json(j);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// config.py:dict_config builds the quantizer from the schedule, and quantizer.py stores its
// bits per module (Quantizer.module_qbits_map): the checkpoint keeps both so a model can be
// prepared again before its tensors are loaded.
TEST_F(CheckpointTest, QuantizationMetaRoundTripsAndIsValidated) {
  Net a;
  CheckpointMeta meta;
  meta.optform = "classify";
  meta.model = "net";
  meta.quantization = ck_quant_meta();
  save_checkpoint(dir_ / "q.ckpt", meta, {a.get(), nullptr, nullptr, nullptr});
  auto ck = Checkpoint::load(dir_ / "q.ckpt");
  EXPECT_EQ(ck.meta().quantization, ck_quant_meta());
  EXPECT_EQ(ck.meta().quantization["bits"]["conv1"]["bits_weights"], 3);

  // A checkpoint written before quantization existed has no key: it loads, unquantized.
  auto old = meta.to_json();
  old.erase("quantization");
  EXPECT_TRUE(CheckpointMeta::from_json(old).quantization.is_null());
  auto none = meta.to_json();
  none["quantization"] = nullptr;
  EXPECT_TRUE(CheckpointMeta::from_json(none).quantization.is_null());
  EXPECT_TRUE(CheckpointMeta{}.to_json()["quantization"].is_null());

  auto with = [&](const nlohmann::json& q) {
    auto j = meta.to_json();
    j["quantization"] = q;
    return ck_meta_error(j);
  };
  EXPECT_EQ(with("PACT"), "'quantization' must be an object or null, not string");
  auto q = ck_quant_meta();
  q["class"] = 3;
  EXPECT_EQ(with(q), "'quantization.class' must be a string, not number");
  q = ck_quant_meta();
  q["bits"] = nlohmann::json::array();
  EXPECT_EQ(with(q), "'quantization.bits' must be an object, not array");
  q = ck_quant_meta();
  q["bits"]["conv1"]["bits_weights"] = "3";
  EXPECT_EQ(with(q),
            "'quantization.bits.conv1.bits_weights' must be an integer or null, not string");
  q = ck_quant_meta();
  q["bits"]["fc"] = 8;
  EXPECT_EQ(with(q), "'quantization.bits.fc' must be an object, not number");
  q = ck_quant_meta();
  q["bits"]["conv1"].erase("bits_bias");
  EXPECT_EQ(with(q), "key 'quantization.bits.conv1.bits_bias' is missing");
  q = ck_quant_meta();
  q["bits"]["relu"]["bits_activations"] = 0;
  EXPECT_EQ(with(q),
            "'quantization.bits.relu.bits_activations' is 0, which cannot be right (bits are "
            "between 1 and 64, null for float)");
  q = ck_quant_meta();
  q["bits"]["relu"]["acts"] = 4;
  EXPECT_EQ(with(q),
            "'quantization.bits.relu' has an unknown key 'acts' (valid: bits_activations, "
            "bits_weights, bits_bias)");
  q = ck_quant_meta();
  q.erase("bits");
  EXPECT_EQ(with(q), "key 'quantization.bits' is missing");
}

}  // namespace igb
