// model_from_checkpoint: a checkpoint's model is rebuilt from the registry, or refused with one
// line naming the checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "compress/quant_modules.h"
#include "core/activation.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "models/model.h"
#include "models/model_from_checkpoint.h"
#include "models/trainer.h"
#include "tests/support.h"

namespace igb::models {

namespace {

class ModelFromCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override { register_builtin_models(); }

  // Saves fsrcnn (scale 2, m = 1) under `meta_options` and returns what loading it throws.
  std::string error_of(const nlohmann::json& meta_options, bool nan_weight = false) {
    torch::manual_seed(1);
    Model model = create_model("fsrcnn", {{"scale", 2}, {"m", 1}});
    if (nan_weight) {
      torch::NoGradGuard no_grad;
      model->named_parameters()[first_weight()].view(-1)[0] = std::nanf("");
    }
    CheckpointMeta meta;
    meta.optform = "sr";
    meta.model = "fsrcnn";
    meta.model_options = meta_options;
    save_checkpoint(path_, meta, {model.get(), nullptr, nullptr, nullptr});
    try {
      model_from_checkpoint(Checkpoint::load(path_));
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }

  std::string first_weight() {
    return create_model("fsrcnn", {{"scale", 2}, {"m", 1}})->named_parameters()[0].key();
  }

  test::TempDir tmp_;
  std::filesystem::path path_ = tmp_ / "m.ckpt";
};

}  // namespace

TEST_F(ModelFromCheckpoint, RebuildsTheSavedModel) {
  EXPECT_EQ(error_of({{"scale", 2}, {"m", 1}}), "(no error)");
}

TEST_F(ModelFromCheckpoint, BadModelOptionsNameTheCheckpoint) {
  EXPECT_EQ(
      error_of({{"scale", 2}, {"m", "x"}}),
      "checkpoint " + path_.string() + ": model fsrcnn: option 'm' has an invalid value \"x\"");
}

TEST_F(ModelFromCheckpoint, ANanWeightIsRefusedNamingTheParameter) {
  EXPECT_EQ(error_of({{"scale", 2}, {"m", 1}}, /*nan_weight=*/true),
            "checkpoint " + path_.string() + ": parameter '" + first_weight() +
                "' holds non-finite values (NaN or infinity)");
}

// quantizer.py:Quantizer.prepare_model (float_weight beside Wq, replaced ReLUs) run again on the
// rebuilt model before its state_dict is loaded, as Distiller's load_checkpoint does for a
// quantized model: the rebuilt model computes exactly what the saved one did.
TEST_F(ModelFromCheckpoint, AQuantizedModelIsPreparedAgainBeforeItsTensorsLoad) {
  torch::manual_seed(2);
  Model model = create_model("resnet20_cifar", nlohmann::json::object());
  auto modules = model->named_modules();
  compress::QuantizedParam::prepare(*modules["layer1.0.conv1"], "weight", 3,
                                    compress::ParamQuantMethod::kDorefa, false);
  auto pact = compress::PactActQuant(4);
  {
    torch::NoGradGuard no_grad;
    pact->clip_val.fill_(2.5);
  }
  modules["layer1.0.relu1"]->as<ActivationImpl>()->replace(torch::nn::AnyModule(pact));
  model->eval();
  torch::manual_seed(3);
  const auto x = torch::randn({2, 3, 32, 32});
  const auto expected = model->forward(x);
  const nlohmann::json none = nullptr;
  CheckpointMeta meta;
  meta.optform = "classify";
  meta.model = "resnet20_cifar";
  meta.model_options = model->options_json();
  meta.quantization = {
      {"class", "PACTQuantizer"},
      {"act_clip_init_val", 8.0},
      {"act_clip_decay", none},
      {"bits",
       {{"layer1.0.conv1", {{"bits_activations", 4}, {"bits_weights", 3}, {"bits_bias", none}}},
        {"layer1.0.relu1", {{"bits_activations", 4}, {"bits_weights", none}, {"bits_bias", none}}},
        {"layer1.0.bn1", {{"bits_activations", 4}, {"bits_weights", none}, {"bits_bias", none}}}}}};
  save_checkpoint(path_, meta, {model.get(), nullptr, nullptr, nullptr});

  Model rebuilt = model_from_checkpoint(Checkpoint::load(path_));
  rebuilt->eval();
  EXPECT_TRUE(torch::equal(rebuilt->forward(x), expected));
  auto buffers = rebuilt->named_buffers();
  EXPECT_EQ(buffers["layer1.0.conv1.weight_bits"].item<int64_t>(), 3);
  EXPECT_TRUE(torch::equal(buffers["layer1.0.conv1.float_weight"],
                           model->named_buffers()["layer1.0.conv1.float_weight"]));
  EXPECT_EQ(rebuilt->named_parameters()["layer1.0.relu1.replacement.clip_val"].item<float>(), 2.5f);
  EXPECT_FALSE(buffers.contains("layer1.0.conv2.float_weight"));

  // A record naming a module the model does not have is one line naming the checkpoint.
  meta.quantization["bits"]["layer9.conv"] = meta.quantization["bits"]["layer1.0.conv1"];
  save_checkpoint(path_, meta, {model.get(), nullptr, nullptr, nullptr});
  try {
    model_from_checkpoint(Checkpoint::load(path_));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint " + path_.string() +
                                         ": quantization names module 'layer9.conv', which the "
                                         "model does not have");
  }
  // Only the symmetric range-linear grids are rebuilt; another mode is refused, not guessed.
  meta.quantization = {{"class", "QuantAwareTrainRangeLinearQuantizer"},
                       {"mode", "ASYMMETRIC_UNSIGNED"},
                       {"bits", nlohmann::json::object()}};
  save_checkpoint(path_, meta, {model.get(), nullptr, nullptr, nullptr});
  try {
    model_from_checkpoint(Checkpoint::load(path_));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint " + path_.string() +
                  ": 'quantization.mode' is \"ASYMMETRIC_UNSIGNED\", which this build cannot "
                  "restore (valid: SYMMETRIC, SYMMETRIC_RESTRICTED)");
  }
}

// A checkpoint of a classifier that claims to be an SR run (its optform edited) is refused in one
// line before the SR evaluator scores a classifier (a LibTorch error, exit 1, before).
TEST_F(ModelFromCheckpoint, AnOptformThatIsNotTheModelsFamilyIsRefused) {
  torch::manual_seed(1);
  Model model = create_model("simplenet_mnist", {});
  CheckpointMeta meta;
  meta.optform = "sr";
  meta.model = "simplenet_mnist";
  save_checkpoint(path_, meta, {model.get(), nullptr, nullptr, nullptr});
  try {
    load_checkpoint_for(path_.string(), "sr");
    FAIL() << "a classifier claiming --optform=sr was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint " + path_.string() +
                                         " says --optform=sr but holds simplenet_mnist, a "
                                         "classify model: it is damaged or was edited");
  }
}

}  // namespace igb::models
