// Inception-v3 (Szegedy et al. 2016) as torchvision builds it, with a stem for 32x32 inputs; and
// the multi-exit network of the cascade, with exits after its layers 4, 8, 12 and 16.
//
// The layers, numbered from 1 in forward order as the cascade numbers them (torchvision's module
// names; the auxiliary classifier is not built): 1 Conv2d_1a_3x3, 2 Conv2d_2a_3x3, 3
// Conv2d_2b_3x3, 4 maxpool1, 5 Conv2d_3b_1x1, 6 Conv2d_4a_3x3, 7 maxpool2, 8 Mixed_5b, 9 Mixed_5c,
// 10 Mixed_5d, 11 Mixed_6a, 12 Mixed_6b, 13 Mixed_6c, 14 Mixed_6d, 15 Mixed_6e, 16 Mixed_7a, 17
// Mixed_7b, 18 Mixed_7c; then avgpool, dropout, fc. For 32x32 the stem convs have stride 1 and
// padding 1 and maxpool2 has stride 1, so the Mixed_5 blocks see 16x16, Mixed_6 7x7, Mixed_7 3x3.
#include <torch/nn/modules/dropout.h>

#include <map>
#include <string>
#include <vector>

#include "core/activation.h"
#include "core/sequential.h"
#include "models/classify/classifier.h"
#include "models/classify/early_exit.h"

namespace igb::models::classify {

namespace nn = torch::nn;

namespace {

/// conv (no bias), BatchNorm (eps 0.001), ReLU: torchvision's BasicConv2d, the ReLU a module.
class BasicConv2dImpl : public nn::Module {
 public:
  BasicConv2dImpl(int64_t in, int64_t out, std::vector<int64_t> k, std::vector<int64_t> pad,
                  int64_t stride = 1) {
    conv = register_module(
        "conv", nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(false)));
    bn = register_module("bn", nn::BatchNorm2d(nn::BatchNorm2dOptions(out).eps(0.001)));
    relu =
        register_module("relu", Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
  }
  torch::Tensor forward(torch::Tensor x) { return relu(bn(conv(x))); }

  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  Activation relu{nullptr};
};
TORCH_MODULE(BasicConv2d);

BasicConv2d square(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) {
  return BasicConv2d(in, out, std::vector<int64_t>{k, k}, std::vector<int64_t>{pad, pad}, stride);
}
/// A 1×7 (wide) or 7×1 conv padded to keep the size.
BasicConv2d line(int64_t in, int64_t out, int64_t len, bool wide) {
  const int64_t p = len / 2;
  using v = std::vector<int64_t>;
  return wide ? BasicConv2d(in, out, v{1, len}, v{0, p}) : BasicConv2d(in, out, v{len, 1}, v{p, 0});
}

enum class Kind { kA, kB, kC, kD, kE };

/// One of torchvision's InceptionA … InceptionE blocks, its convs named as there
/// ("branch5x5_1", "branch3x3dbl_3", …) and its pooling a module ("pool").
class InceptionBlockImpl : public nn::Module {
 public:
  InceptionBlockImpl(Kind kind, int64_t in, int64_t c = 0) : kind_(kind) {
    switch (kind) {
      case Kind::kA:  // c = pool_features
        add("branch1x1", square(in, 64, 1));
        add("branch5x5_1", square(in, 48, 1));
        add("branch5x5_2", square(48, 64, 5, 1, 2));
        add_double_3x3(in, 64, 96, 1);
        add("branch_pool", square(in, c, 1));
        break;
      case Kind::kB:
        add("branch3x3", square(in, 384, 3, 2));
        add_double_3x3(in, 64, 96, 2);
        break;
      case Kind::kC:  // c = channels_7x7
        add("branch1x1", square(in, 192, 1));
        add("branch7x7_1", square(in, c, 1));
        add("branch7x7_2", line(c, c, 7, true));
        add("branch7x7_3", line(c, 192, 7, false));
        add("branch7x7dbl_1", square(in, c, 1));
        add("branch7x7dbl_2", line(c, c, 7, false));
        add("branch7x7dbl_3", line(c, c, 7, true));
        add("branch7x7dbl_4", line(c, c, 7, false));
        add("branch7x7dbl_5", line(c, 192, 7, true));
        add("branch_pool", square(in, 192, 1));
        break;
      case Kind::kD:
        add("branch3x3_1", square(in, 192, 1));
        add("branch3x3_2", square(192, 320, 3, 2));
        add("branch7x7x3_1", square(in, 192, 1));
        add("branch7x7x3_2", line(192, 192, 7, true));
        add("branch7x7x3_3", line(192, 192, 7, false));
        add("branch7x7x3_4", square(192, 192, 3, 2));
        break;
      case Kind::kE:
        add("branch1x1", square(in, 320, 1));
        add("branch3x3_1", square(in, 384, 1));
        add("branch3x3_2a", line(384, 384, 3, true));
        add("branch3x3_2b", line(384, 384, 3, false));
        add("branch3x3dbl_1", square(in, 448, 1));
        add("branch3x3dbl_2", square(448, 384, 3, 1, 1));
        add("branch3x3dbl_3a", line(384, 384, 3, true));
        add("branch3x3dbl_3b", line(384, 384, 3, false));
        add("branch_pool", square(in, 192, 1));
        break;
    }
    if (kind == Kind::kB || kind == Kind::kD)
      max_pool = register_module("pool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2)));
    else
      avg_pool =
          register_module("pool", nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(1).padding(1)));
  }

  torch::Tensor forward(torch::Tensor x) {
    switch (kind_) {
      case Kind::kA:
        return torch::cat({run("branch1x1", x), run("branch5x5_2", run("branch5x5_1", x)),
                           double_3x3(x), run("branch_pool", avg_pool(x))},
                          1);
      case Kind::kB:
        return torch::cat({run("branch3x3", x), double_3x3(x), max_pool(x)}, 1);
      case Kind::kC: {
        auto b7 = run("branch7x7_3", run("branch7x7_2", run("branch7x7_1", x)));
        auto d = run("branch7x7dbl_1", x);
        for (const char* n :
             {"branch7x7dbl_2", "branch7x7dbl_3", "branch7x7dbl_4", "branch7x7dbl_5"})
          d = run(n, d);
        return torch::cat({run("branch1x1", x), b7, d, run("branch_pool", avg_pool(x))}, 1);
      }
      case Kind::kD: {
        auto b3 = run("branch3x3_2", run("branch3x3_1", x));
        auto b7 = run("branch7x7x3_1", x);
        for (const char* n : {"branch7x7x3_2", "branch7x7x3_3", "branch7x7x3_4"}) b7 = run(n, b7);
        return torch::cat({b3, b7, max_pool(x)}, 1);
      }
      case Kind::kE: {
        auto b3 = run("branch3x3_1", x);
        auto d = run("branch3x3dbl_2", run("branch3x3dbl_1", x));
        return torch::cat(
            {run("branch1x1", x), run("branch3x3_2a", b3), run("branch3x3_2b", b3),
             run("branch3x3dbl_3a", d), run("branch3x3dbl_3b", d), run("branch_pool", avg_pool(x))},
            1);
      }
    }
    return x;
  }

 private:
  void add(const std::string& name, BasicConv2d conv) {
    convs_.emplace(name, register_module(name, std::move(conv)));
  }
  /// branch3x3dbl_1 (1x1), _2 (3x3), _3 (3x3 of `stride`; padded when stride 1).
  void add_double_3x3(int64_t in, int64_t mid, int64_t out, int64_t stride) {
    add("branch3x3dbl_1", square(in, mid, 1));
    add("branch3x3dbl_2", square(mid, out, 3, 1, 1));
    add("branch3x3dbl_3", square(out, out, 3, stride, stride == 1 ? 1 : 0));
  }
  torch::Tensor double_3x3(const torch::Tensor& x) {
    return run("branch3x3dbl_3", run("branch3x3dbl_2", run("branch3x3dbl_1", x)));
  }
  torch::Tensor run(const std::string& name, const torch::Tensor& x) {
    return convs_.at(name)->forward(x);
  }

  Kind kind_;
  std::map<std::string, BasicConv2d> convs_;
  nn::AvgPool2d avg_pool{nullptr};
  nn::MaxPool2d max_pool{nullptr};
};
TORCH_MODULE(InceptionBlock);

class InceptionV3CifarImpl : public ClassifierImpl {
 public:
  explicit InceptionV3CifarImpl(InceptionV3CifarOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    layer("Conv2d_1a_3x3", square(3, 32, 3, 1, 1));
    layer("Conv2d_2a_3x3", square(32, 32, 3, 1, 1));
    layer("Conv2d_2b_3x3", square(32, 64, 3, 1, 1));
    layer("maxpool1", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    layer("Conv2d_3b_1x1", square(64, 80, 1));
    layer("Conv2d_4a_3x3", square(80, 192, 3, 1, 1));
    layer("maxpool2", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(1).padding(1)));
    layer("Mixed_5b", InceptionBlock(Kind::kA, 192, 32));
    layer("Mixed_5c", InceptionBlock(Kind::kA, 256, 64));
    layer("Mixed_5d", InceptionBlock(Kind::kA, 288, 64));
    layer("Mixed_6a", InceptionBlock(Kind::kB, 288));
    layer("Mixed_6b", InceptionBlock(Kind::kC, 768, 128));
    layer("Mixed_6c", InceptionBlock(Kind::kC, 768, 160));
    layer("Mixed_6d", InceptionBlock(Kind::kC, 768, 160));
    layer("Mixed_6e", InceptionBlock(Kind::kC, 768, 192));
    layer("Mixed_7a", InceptionBlock(Kind::kD, 768));
    layer("Mixed_7b", InceptionBlock(Kind::kE, 1280));
    layer("Mixed_7c", InceptionBlock(Kind::kE, 2048));
    avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    dropout = register_module("dropout", nn::Dropout(0.5));
    fc = register_module("fc", nn::Linear(2048, o.num_classes()));
    if (o.exits()) add_exits();
  }

  torch::Tensor forward_impl(torch::Tensor x) override {
    for (size_t i = 0; i < layers_.size(); ++i) {
      x = layers_[i].forward(x);
      if (auto it = exits_.find(i + 1); it != exits_.end()) x = it->second(x);
    }
    return fc(dropout(avgpool(x).flatten(1)));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  InceptionV3CifarOptions options;
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  nn::Dropout dropout{nullptr};
  nn::Linear fc{nullptr};

 private:
  template <class M>
  void layer(const std::string& name, M module) {
    layers_.emplace_back(register_module(name, module));
  }

  /// The cascade's exits after layers 4, 8, 12 and 16: a ReLU named after<k> (an identity there:
  /// every one of those layers ends in ReLUs, a max pool or a concat of them, so nothing is
  /// negative) as the branch point, and a pooled linear head on it.
  void add_exits() {
    const std::vector<std::pair<size_t, int64_t>> points = {
        {4, 64}, {8, 256}, {12, 768}, {16, 1280}};
    std::vector<ExitSpec> specs;
    for (const auto& [k, channels] : points) {
      const std::string name = "after" + std::to_string(k);
      exits_.emplace(k,
                     register_module(name, Activation(ActivationOptions(ActivationKind::kReLU))));
      specs.push_back({name, pooled_linear_head(channels, 2, options.num_classes())});
    }
    attach_exits(*this, specs);
  }

  std::vector<nn::AnyModule> layers_;
  std::map<size_t, Activation> exits_;
};

}  // namespace

Model make_inception_v3_cifar(const InceptionV3CifarOptions& options) {
  return std::make_shared<InceptionV3CifarImpl>(options);
}

}  // namespace igb::models::classify
