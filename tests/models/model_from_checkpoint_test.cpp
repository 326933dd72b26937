// model_from_checkpoint: a checkpoint's model is rebuilt from the registry, or refused with one
// line naming the checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/checkpoint.h"
#include "core/error.h"
#include "models/model.h"
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
    save_checkpoint(path_, meta, {model.get(), nullptr, nullptr});
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

}  // namespace igb::models
