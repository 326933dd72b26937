#include "tools/profile.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include <stdexcept>

#include "models/model.h"
#include "tests/tools/tools_support.h"

namespace igb::tools {

namespace {

ProfileOptions quick() {
  ProfileOptions o;
  o.batch_sizes = {1, 2};
  o.warmup = 0;
  o.repeats = 1;
  return o;
}

}  // namespace

TEST(Profile, LeavesTheCallersRandomStreamAlone) {
  auto m = make("simplenet_cifar");
  auto forward = [&](const torch::Tensor& x) { return m->forward(x); };

  torch::manual_seed(123);
  const auto expected = torch::rand({16});

  torch::manual_seed(123);
  profile_model(*m, m->input_shape(), forward, "simplenet_cifar", quick());
  const auto after = torch::rand({16});
  EXPECT_TRUE(torch::equal(after, expected)) << after << "\nexpected\n" << expected;

  // Half a stream drawn before the call continues where it was.
  torch::manual_seed(123);
  const auto first = torch::rand({8});
  profile_model(*m, m->input_shape(), forward, "simplenet_cifar", quick());
  const auto second = torch::rand({8});
  EXPECT_TRUE(torch::equal(torch::cat({first, second}), expected));
}

TEST(Profile, RestoresTrainingModeWhenTheForwardThrows) {
  auto m = make("simplenet_cifar");
  m->train();
  // Tracing the graph calls it too; the first call outside the tracer is the profile's own.
  int untraced_calls = 0;
  auto forward = [&](const torch::Tensor& x) {
    if (!torch::jit::tracer::isTracing()) {
      ++untraced_calls;
      EXPECT_FALSE(m->is_training());  // profiling runs in eval mode
      throw std::runtime_error("forward failed");
    }
    return m->forward(x);
  };
  EXPECT_THROW(profile_model(*m, m->input_shape(), forward, "simplenet_cifar", quick()),
               std::runtime_error);
  EXPECT_EQ(untraced_calls, 1);
  EXPECT_TRUE(m->is_training());
}

}  // namespace igb::tools

namespace igb::tools {

TEST(Profile, TheInferenceFormGivesAFusedChainsTimeToItsLayer) {
  auto m = make("resnet20_cifar");
  auto forward = [&](const torch::Tensor& x) { return m->forward(x); };
  auto options = quick();
  options.batch_sizes = {1};
  options.inference = true;
  const auto p = profile_model(*m, m->input_shape(), forward, "resnet20_cifar", options);
  EXPECT_EQ(p.runtime, "inference form");
  EXPECT_EQ(profile_json(p)["runtime"], "inference form");
  double convs = 0, folded = 0;
  for (const auto& l : p.batches.at(0).layers) {
    if (l.type == "Conv") {
      EXPECT_GT(l.forward_ms, 0) << l.name;
      convs += l.forward_ms;
    }
    if (l.type == "BatchNorm") folded += l.forward_ms;
  }
  // Every BatchNorm is folded into its convolution's step (a ReLU ending a chain is given the
  // time of a layout change of its output, when the plan makes one).
  EXPECT_EQ(folded, 0);
  EXPECT_GT(convs, 0);
  EXPECT_GT(p.batches.at(0).forward_ms, 0);
}

}  // namespace igb::tools
