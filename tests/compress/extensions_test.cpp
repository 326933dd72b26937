// The extension registry: building StructureRemover and its aliases FilterRemover and
// ChannelRemover from YAML, a thinning extension acting on a model, and when the scheduler runs it.
#include "compress/extensions.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <torch/optim/sgd.h>

#include <functional>

#include "compress/scheduler.h"
#include "core/error.h"
#include "core/yaml_reader.h"
#include "models/model.h"
#include "tests/support.h"

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

using test::input_error_of;

}  // namespace

TEST(Extensions, RegistryNamesTheThinningClasses) {
  register_builtin_extensions();
  EXPECT_EQ(extension_registry().names(),
            (std::vector<std::string>{"ChannelRemover", "FilterRemover", "StructureRemover"}));
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

  EXPECT_EQ(
      input_error_of([] { build("class: FilterRemover\nthinning_func_str: remove_layers\n"); }),
      "e.yaml:2: extensions.t (FilterRemover).thinning_func_str 'remove_layers' is unknown; "
      "valid: remove_filters, remove_channels");
  EXPECT_EQ(
      input_error_of([] { build("class: FilterRemover\nthining_func_str: remove_filters\n"); }),
      "e.yaml:2: unknown key 'thining_func_str' in extensions.t (FilterRemover); valid keys: "
      "class, thinning_func_str, arch, dataset; did you mean thinning_func_str?");
}

// distiller/thinning.py: FilterRemover and ChannelRemover are aliases of StructureRemover, whose
// thinning_func_str says what is removed.
TEST(Extensions, TheThreeClassesAreAliasesChosenByThinningFunction) {
  auto channels_by_filters = build("class: ChannelRemover\nthinning_func_str: remove_filters\n");
  EXPECT_EQ(dynamic_cast<ThinningExtension&>(*channels_by_filters).options().kind(),
            ThinningKind::kFilters);
  EXPECT_EQ(channels_by_filters->hyperparams(),
            nlohmann::json({{"class", "ChannelRemover"}, {"thinning_func_str", "remove_filters"}}));
  auto structure = build(
      "class: StructureRemover\nthinning_func_str: remove_channels\narch: resnet20_cifar\n"
      "dataset: cifar10\n");
  EXPECT_EQ(structure->class_name(), "StructureRemover");
  EXPECT_EQ(dynamic_cast<ThinningExtension&>(*structure).options().kind(), ThinningKind::kChannels);
  EXPECT_EQ(input_error_of([] { build("class: StructureRemover\narch: resnet20_cifar\n"); }),
            "e.yaml:1: extensions.t (StructureRemover) is missing the key 'thinning_func_str'");
  EXPECT_EQ(
      input_error_of([] { build("class: StructureRemover\nthining_func_str: remove_filters\n"); }),
      "e.yaml:2: unknown key 'thining_func_str' in extensions.t (StructureRemover); did you "
      "mean thinning_func_str?");
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
        "s.yaml:4: unknown extension class 'FilterRemoval'; valid: ChannelRemover, FilterRemover, "
        "StructureRemover");
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
  const graph::SummaryGraph::Forward forward = [m](const torch::Tensor& x) {
    return m->forward(x);
  };
  const std::string file = "s.yaml";
  const WidthPolicy no_rounding;
  const ExtensionContext ctx{*m, shape, forward, opt, masks, nullptr, file, no_rounding};

  auto ext = build("class: FilterRemover\n");
  const auto outcome = ext->apply(ctx, 3);
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
  const auto again = ext->apply(ctx, 4);
  EXPECT_FALSE(again.reshaped);
  EXPECT_TRUE(again.recipe.is_null());
}

}  // namespace igb::compress

namespace igb::compress {

// distiller/thinning.py StructureRemover.on_minibatch_begin: thinning acts once, at the first
// minibatch of its scheduled epoch, so that epoch trains the thin model.
TEST(Extensions, ThinningActsAtTheFirstMinibatchOfItsEpoch) {
  models::register_builtin_models();
  torch::manual_seed(0);
  auto m = models::create_model("simplenet_cifar", {});
  {
    torch::NoGradGuard no_grad;
    auto params = m->named_parameters();
    params["conv1.weight"].narrow(0, 0, 2).zero_();
    params["conv1.bias"].narrow(0, 0, 2).zero_();
  }
  auto s = CompressionScheduler::from_text(
      "version: 1\nextensions:\n  t: {class: FilterRemover}\npolicies:\n"
      "  - extension: {instance_name: t}\n    epochs: [1]\n",
      "s.yaml", *m, 0.1, nullptr);
  s->set_tracer(m->input_shape(), [m](const torch::Tensor& x) { return m->forward(x); });
  torch::optim::SGD opt(m->parameters(), 0.1);
  auto filters = [&] { return m->named_parameters()["conv1.weight"].size(0); };
  s->on_epoch_begin(0, opt);
  s->on_minibatch_begin({0, 0, 2}, opt);
  s->on_epoch_end(0, {}, opt);
  s->on_epoch_begin(1, opt);
  EXPECT_EQ(filters(), 6);
  EXPECT_TRUE(s->take_thinning_recipes().empty());
  s->on_minibatch_begin({1, 0, 2}, opt);
  EXPECT_EQ(filters(), 4);
  auto shape = m->input_shape();
  shape[0] = 2;
  EXPECT_EQ(m->forward(torch::rand(shape)).size(0), 2);  // the epoch trains the thin model
  const auto recipes = s->take_thinning_recipes();
  ASSERT_EQ(recipes.size(), 1u);
  EXPECT_EQ(recipes[0]["epoch"], 1);
  s->on_minibatch_begin({1, 1, 2}, opt);
  s->on_epoch_end(1, {}, opt);
  EXPECT_TRUE(s->take_thinning_recipes().empty());
}

}  // namespace igb::compress
