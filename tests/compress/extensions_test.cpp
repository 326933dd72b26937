// The extension registry: building FilterRemover and ChannelRemover from YAML, and a thinning
// extension acting on a model.
#include "compress/extensions.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <torch/optim/sgd.h>

#include <functional>

#include "compress/scheduler.h"
#include "compress/yaml_reader.h"
#include "core/error.h"
#include "models/model.h"

namespace igb::compress {

namespace {

// Builds an extension of the class named in `yaml` (a mapping), as the scheduler does.
std::unique_ptr<Extension> build(const std::string& yaml) {
  register_builtin_extensions();
  YAML::Node node = YAML::Load(yaml);
  const auto cls = node["class"].as<std::string>();
  YamlReader r(node, "e.yaml", "extensions.t (" + cls + ")");
  r.ignore({"class"});
  auto ext = extension_registry().get(cls)("t", r);
  r.finish();
  return ext;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace

TEST(Extensions, RegistryNamesTheThinningClasses) {
  register_builtin_extensions();
  EXPECT_EQ(extension_registry().names(),
            (std::vector<std::string>{"ChannelRemover", "FilterRemover"}));
  EXPECT_NE(extension_registry().entry("FilterRemover").help.find("remove_filters"),
            std::string::npos);
}

TEST(Extensions, FilterRemoverChecksItsThinningFunction) {
  auto ext = build(
      "class: FilterRemover\nthinning_func_str: remove_filters\narch: resnet20_cifar\ndataset: "
      "cifar10\n");
  EXPECT_EQ(ext->name(), "t");
  EXPECT_EQ(ext->class_name(), "FilterRemover");
  auto* thinning = dynamic_cast<ThinningExtension*>(ext.get());
  ASSERT_NE(thinning, nullptr);
  EXPECT_EQ(thinning->options().kind(), ThinningKind::kFilters);
  EXPECT_EQ(ext->hyperparams(),
            nlohmann::json({{"class", "FilterRemover"}, {"thinning_func_str", "remove_filters"}}));

  EXPECT_EQ(error_of([] { build("class: FilterRemover\nthinning_func_str: remove_channels\n"); }),
            "e.yaml:2: FilterRemover takes thinning_func_str: remove_filters, not remove_channels");
  EXPECT_NE(error_of([] {
              build("class: FilterRemover\nthining_func_str: remove_filters\n");
            }).find("thining_func_str"),
            std::string::npos);
}

TEST(Extensions, ChannelRemoverDefaultsItsThinningFunction) {
  auto ext = build("class: ChannelRemover\n");
  EXPECT_EQ(dynamic_cast<ThinningExtension&>(*ext).options().kind(), ThinningKind::kChannels);
  EXPECT_EQ(ext->hyperparams()["thinning_func_str"], "remove_channels");
}

TEST(Extensions, TheSchedulerRejectsAnUnknownClassListingTheRegistry) {
  torch::nn::Linear model(4, 2);
  try {
    CompressionScheduler::from_text(
        "version: 1\nextensions:\n  t:\n    class: FilterRemoval\npolicies: []\n", "s.yaml", *model,
        0.1, nullptr);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "s.yaml:4: unknown extension class 'FilterRemoval'; valid: ChannelRemover, FilterRemover");
  }
}

// Two zeroed conv1 filters of simplenet_cifar go, with conv2's input channels, the momentum
// buffers and the masks.
TEST(Extensions, FilterRemoverThinsTheModelAndReportsTheRecipe) {
  models::register_builtin_models();
  torch::manual_seed(0);
  auto m = models::create_model("simplenet_cifar", {});
  auto params = m->named_parameters();
  {
    torch::NoGradGuard no_grad;
    params["conv1.weight"].narrow(0, 0, 2).zero_();
    params["conv1.bias"].narrow(0, 0, 2).zero_();
  }
  torch::optim::SGD opt(m->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  MaskTable masks = {{"conv2.weight", torch::ones({16, 6, 5, 5})}};
  const std::vector<int64_t> shape = m->input_shape();
  const tools::SummaryGraph::Forward forward = [m](const torch::Tensor& x) {
    return m->forward(x);
  };
  const std::string file = "s.yaml";
  const ExtensionContext ctx{*m, shape, forward, opt, masks, nullptr, file};

  auto ext = build("class: FilterRemover\n");
  const auto outcome = ext->on_epoch_end(ctx, 3);
  EXPECT_TRUE(outcome.reshaped);
  params = m->named_parameters();
  EXPECT_EQ(params["conv1.weight"].sizes(), torch::IntArrayRef({4, 3, 5, 5}));
  EXPECT_EQ(params["conv2.weight"].sizes(), torch::IntArrayRef({16, 4, 5, 5}));
  EXPECT_EQ(masks.at("conv2.weight").sizes(), torch::IntArrayRef({16, 4, 5, 5}));
  EXPECT_EQ(outcome.recipe["epoch"], 3);
  // 2 filters of 3·5·5 weights + 1 bias, and 2 input channels of 16 filters of 5·5.
  EXPECT_EQ(outcome.recipe["params_before"].get<int64_t>() -
                outcome.recipe["params_after"].get<int64_t>(),
            2 * (75 + 1) + 16 * 2 * 25);
  EXPECT_LT(outcome.recipe["macs_after"].get<int64_t>(),
            outcome.recipe["macs_before"].get<int64_t>());

  // Nothing zeroed is left: the next epoch changes nothing.
  const auto again = ext->on_epoch_end(ctx, 4);
  EXPECT_FALSE(again.reshaped);
  EXPECT_TRUE(again.recipe.is_null());
}

}  // namespace igb::compress
