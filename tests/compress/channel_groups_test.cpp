// Channel groups and thinning follow every op the summary graph's walk follows (one op table).
#include <gtest/gtest.h>

#include "compress/channel_groups.h"
#include "compress/thinning.h"
#include "core/thinning_recipe.h"

namespace igb::compress {

namespace {

using graph::SummaryGraph;

/// conv -> SiLU -> conv -> Hardswish -> GELU -> conv, plus an exp branch that must stay.
class SmoothNet : public torch::nn::Module {
 public:
  explicit SmoothNet(bool with_exp = false) : with_exp_(with_exp) {
    a = register_module("a", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)));
    b = register_module("b", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 6, 3).padding(1)));
    c = register_module("c", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 3, 3).padding(1)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::silu(a(x));
    if (with_exp_) h = torch::exp(h);
    return c(torch::gelu(torch::hardswish(b(h))));
  }
  torch::nn::Conv2d a{nullptr}, b{nullptr}, c{nullptr};

 private:
  bool with_exp_;
};

SummaryGraph graph_of(const std::shared_ptr<SmoothNet>& m) {
  return SummaryGraph::build(*m, {1, 3, 8, 8},
                             [m](const torch::Tensor& x) { return m->forward(x); });
}

void zero_filters(torch::nn::Conv2d& conv, std::initializer_list<int64_t> channels) {
  torch::NoGradGuard no_grad;
  for (int64_t ch : channels) {
    conv->weight[ch].zero_();
    conv->bias[ch].zero_();
  }
}

}  // namespace

TEST(ChannelGroups, GroupsThroughSiluHardswishAndGeluAreRemovable) {
  torch::manual_seed(0);
  auto m = std::make_shared<SmoothNet>();
  m->to(torch::kDouble);
  auto g = graph_of(m);
  bool removable = false;
  auto group = channel_group(*m, g, "a", 2, &removable);
  EXPECT_TRUE(removable);
  // Producer a's filter 2 and bias 2, consumer b's input channel 2.
  ASSERT_EQ(group.size(), 3u);
  EXPECT_EQ(group[2].role, GroupMember::Role::kConsumer);
  EXPECT_EQ(group[2].tensor, "b.weight");
  EXPECT_EQ(group[2].dim, 1);
  EXPECT_EQ(group[2].index, 2);

  zero_filters(m->a, {2, 5});
  zero_filters(m->b, {0});
  const auto x = torch::randn({2, 3, 8, 8}, torch::kDouble);
  const auto before = m->forward(x);
  auto plan = plan_thinning(*m, g, ThinningKind::kFilters);
  EXPECT_EQ(plan.removed_groups, 3);
  apply_thinning_recipe(*m, plan.recipe, "smooth");
  EXPECT_EQ(m->a->weight.size(0), 6);
  EXPECT_EQ(m->b->weight.size(1), 6);
  EXPECT_EQ(m->b->weight.size(0), 5);
  EXPECT_EQ(m->c->weight.size(1), 5);
  EXPECT_LE((m->forward(x) - before).abs().max().item<double>(), 1e-12);
}

TEST(ChannelGroups, AnOpThatTurnsZeroIntoOneKeepsItsChannels) {
  torch::manual_seed(0);
  auto m = std::make_shared<SmoothNet>(/*with_exp=*/true);
  m->to(torch::kDouble);
  auto g = graph_of(m);
  zero_filters(m->a, {2});
  // exp(silu(0)) = 1: removing a's channel 2 would change b's input, so it stays and says why.
  auto plan = plan_thinning(*m, g, ThinningKind::kFilters);
  EXPECT_TRUE(plan.empty());
  ASSERT_EQ(plan.log.size(), 1u);
  EXPECT_NE(plan.log[0].find("a: 1 zeroed filter kept: "), std::string::npos) << plan.log[0];
  EXPECT_NE(plan.log[0].find("(Exp) turns a zero channel into a non-zero one"), std::string::npos)
      << plan.log[0];
}

TEST(ChannelGroups, BuiltGroupsNameTheirPartnersAndFollowers) {
  torch::manual_seed(0);
  auto m = std::make_shared<SmoothNet>();
  auto g = graph_of(m);
  auto groups = build_channel_groups(*m, g);
  ASSERT_TRUE(groups->has("a.weight"));
  ASSERT_TRUE(groups->has("c.weight"));
  EXPECT_FALSE(groups->has("a.bias"));
  EXPECT_TRUE(groups->removable("a.weight", 4));
  EXPECT_FALSE(groups->removable("c.weight", 0));  // c writes the model's output
  EXPECT_TRUE(groups->partners("b.weight").empty());
  const auto& members = groups->members("b.weight", 3);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].tensor, "b.weight");
  EXPECT_EQ(members[1].tensor, "b.bias");
}

}  // namespace igb::compress
