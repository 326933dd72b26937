#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/classify/classifier.h"
#include "models/classify/classify_import.h"
#include "models/model.h"
#include "models/sr/fsrcnn.h"
#include "models/sr/sr_import.h"
#include "models/sr/vdsr.h"

namespace igb::models {

namespace {

std::map<std::string, std::vector<int64_t>> parameter_shapes(const torch::nn::Module& m) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value().sizes().vec();
  return out;
}

std::string error_of(const std::string& name, const nlohmann::json& args) {
  try {
    create_model(name, args);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

class ModelOptions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_models(); }
};

TEST_F(ModelOptions, FsrcnnOptionsRoundTripThroughJsonToAnIdenticalModel) {
  const auto options = sr::FsrcnnOptions().scale(2).channels(3).d(32).s(8).m(3);
  const nlohmann::json json = options_to_json(options);
  EXPECT_EQ(json, nlohmann::json({{"scale", 2}, {"channels", 3}, {"d", 32}, {"s", 8}, {"m", 3}}));

  const auto back = options_from_json<sr::FsrcnnOptions>("fsrcnn", json);
  EXPECT_EQ(back.scale(), 2);
  EXPECT_EQ(back.channels(), 3);
  EXPECT_EQ(back.d(), 32);
  EXPECT_EQ(back.s(), 8);
  EXPECT_EQ(back.m(), 3);

  auto typed = sr::make_fsrcnn(options);
  auto from_json = create_model("fsrcnn", json);
  EXPECT_EQ(typed->options_json(), json);
  EXPECT_EQ(from_json->options_json(), json);
  EXPECT_EQ(parameter_shapes(*from_json), parameter_shapes(*typed));
  EXPECT_EQ(parameter_shapes(*from_json)["mid_part.7.0.weight"],
            (std::vector<int64_t>{32, 8, 1, 1}));
}

TEST_F(ModelOptions, DenseNetOptionsRoundTripThroughJsonToAnIdenticalModel) {
  const auto options =
      classify::DenseNetCifarOptions().num_classes(5).input_size(40).depth(16).growth(8);
  const nlohmann::json json = options_to_json(options);
  EXPECT_EQ(json,
            nlohmann::json({{"num_classes", 5}, {"input_size", 40}, {"depth", 16}, {"growth", 8}}));
  auto typed = classify::make_densenet_cifar(options);
  auto from_json = create_model("densenet_cifar", json);
  EXPECT_EQ(from_json->options_json(), json);
  EXPECT_EQ(from_json->input_shape(), (std::vector<int64_t>{1, 3, 40, 40}));
  EXPECT_EQ(parameter_shapes(*from_json), parameter_shapes(*typed));
}

// What checkpoints written before the options structs hold under `model_options`: the keys and
// default values of every model must stay exactly these, or old checkpoints stop loading.
TEST_F(ModelOptions, RegistryDefaultsAreTheCheckpointKeysOfBefore) {
  const nlohmann::json sr = {{"scale", 3}, {"channels", 1}};
  const nlohmann::json cifar = {{"num_classes", 10}, {"input_size", 32}};
  const nlohmann::json imagenet = {{"num_classes", 1000}, {"input_size", 224}};
  auto with = [](nlohmann::json j, const nlohmann::json& more) {
    j.update(more);
    return j;
  };
  const std::map<std::string, nlohmann::json> expected = {
      {"srcnn", sr},
      {"espcn", sr},
      {"fsrcnn", with(sr, {{"d", 56}, {"s", 12}, {"m", 4}})},
      {"vdsr", with(sr, {{"depth", 20}})},
      {"simplenet_cifar", cifar},
      {"lenet5", {{"num_classes", 10}, {"input_size", 28}}},
      {"simplenet_mnist", {{"num_classes", 10}, {"input_size", 28}}},
      // shortcut is newer than the first checkpoints; those lack it and load as "pad".
      {"resnet20_cifar", with(cifar, {{"shortcut", "pad"}})},
      {"resnet32_cifar", with(cifar, {{"shortcut", "pad"}})},
      {"resnet44_cifar", with(cifar, {{"shortcut", "pad"}})},
      {"resnet56_cifar", with(cifar, {{"shortcut", "pad"}})},
      {"resnet110_cifar", with(cifar, {{"shortcut", "pad"}})},
      {"resnet20_cifar_earlyexit", with(cifar, {{"shortcut", "pad"}})},
      {"resnet32_cifar_earlyexit", with(cifar, {{"shortcut", "pad"}})},
      {"resnet44_cifar_earlyexit", with(cifar, {{"shortcut", "pad"}})},
      {"resnet56_cifar_earlyexit", with(cifar, {{"shortcut", "pad"}})},
      {"resnet110_cifar_earlyexit", with(cifar, {{"shortcut", "pad"}})},
      {"preact_resnet20_cifar", with(cifar, {{"shortcut", "pad"}})},
      {"preact_resnet32_cifar", with(cifar, {{"shortcut", "pad"}})},
      {"preact_resnet44_cifar", with(cifar, {{"shortcut", "pad"}})},
      {"preact_resnet56_cifar", with(cifar, {{"shortcut", "pad"}})},
      {"preact_resnet110_cifar", with(cifar, {{"shortcut", "pad"}})},
      {"plain20_cifar", cifar},
      {"vgg16_cifar", with(cifar, {{"layout", "li"}})},
      {"vgg11_cifar", cifar},
      {"vgg11_bn_cifar", cifar},
      {"vgg13_cifar", cifar},
      {"vgg13_bn_cifar", cifar},
      {"vgg16_bn_cifar", cifar},
      {"vgg19_cifar", cifar},
      {"vgg19_bn_cifar", cifar},
      {"densenet_cifar", with(cifar, {{"depth", 40}, {"growth", 12}})},
      {"inception_v3_cifar", cifar},
      {"inception_v3_cifar_earlyexit", cifar},
      {"resnet50_earlyexit", imagenet},
      {"resnet18", imagenet},
      {"resnet34", imagenet},
      {"resnet50", imagenet},
      {"preact_resnet18", imagenet},
      {"preact_resnet34", imagenet},
      {"preact_resnet50", imagenet},
      {"vgg11", imagenet},
      {"vgg13", imagenet},
      {"vgg16", imagenet},
      {"vgg19", imagenet},
      {"vgg11_bn", imagenet},
      {"vgg13_bn", imagenet},
      {"vgg16_bn", imagenet},
      {"vgg19_bn", imagenet},
      {"alexnet", imagenet},
      {"alexnet_bn", {{"num_classes", 1000}, {"input_size", 227}}},
      {"mobilenet", with(imagenet, {{"channel_multiplier", 1.0}})},
      {"mobilenet_025", with(imagenet, {{"channel_multiplier", 0.25}})},
      {"mobilenet_050", with(imagenet, {{"channel_multiplier", 0.5}})},
      {"mobilenet_075", with(imagenet, {{"channel_multiplier", 0.75}})},
      {"mobilenet_v2", imagenet},
      {"deblurgan", {{"ngf", 64}, {"blocks", 9}, {"dropout", 0.5}}},
      {"deblurgan_small", {{"ngf", 16}, {"blocks", 3}, {"dropout", 0.0}}},
      {"patchgan", {{"ndf", 64}, {"n_layers", 3}}},
      {"patchgan_small", {{"ndf", 16}, {"n_layers", 3}}},
      {"patchgan_tiny", {{"ndf", 8}, {"n_layers", 3}}},
      // torchscript:PATH (docs/byo-model.md): the file and what a forward on zeros tells.
      {"torchscript",
       {{"file", ""}, {"crc32c", ""}, {"family", "auto"}, {"input_size", 32}, {"channels", 3}}},
      // onnx:PATH (docs/onnx-import.md): 0 takes the file's own input dimensions.
      {"onnx",
       {{"file", ""}, {"crc32c", ""}, {"family", "auto"}, {"input_size", 0}, {"channels", 0}}}};
  EXPECT_EQ(model_registry().names().size(), expected.size());
  for (const auto& name : model_registry().names()) {
    ASSERT_TRUE(expected.count(name)) << name;
    EXPECT_EQ(model_registry().get(name).defaults, expected.at(name)) << name;
  }
  // A default model emits its registry defaults, and options as an old checkpoint stored them
  // (numbers, all keys) rebuild the same model.
  for (const char* name : {"fsrcnn", "vdsr", "resnet20_cifar", "densenet_cifar", "lenet5"}) {
    auto m = create_model(name, {});
    EXPECT_EQ(m->options_json(), expected.at(name)) << name;
    EXPECT_EQ(parameter_shapes(*create_model(name, expected.at(name))), parameter_shapes(*m))
        << name;
  }
  // Checkpoints from before the shortcut and layout options rebuild the models of then.
  EXPECT_EQ(parameter_shapes(*create_model("resnet20_cifar", cifar)),
            parameter_shapes(*create_model("resnet20_cifar", {})));
  EXPECT_EQ(parameter_shapes(*create_model("vgg16_cifar", cifar)),
            parameter_shapes(*create_model("vgg16_cifar", {})));
}

TEST_F(ModelOptions, RegistryNameFixesTheFieldsThatAreNotModelArgs) {
  auto o = options_from_json<classify::ResNetCifarOptions>(
      "resnet56_cifar", {{"num_classes", "7"}}, classify::ResNetCifarOptions().depth(56));
  EXPECT_EQ(o.depth(), 56);
  EXPECT_EQ(o.num_classes(), 7);
  EXPECT_EQ(options_to_json(o),
            nlohmann::json({{"num_classes", 7}, {"input_size", 32}, {"shortcut", "pad"}}));
  // 9 basic blocks per stage: layer1.8 exists, layer1.9 does not.
  auto params = create_model("resnet56_cifar", {})->named_parameters();
  EXPECT_TRUE(params.contains("layer1.8.conv2.weight"));
  EXPECT_FALSE(params.contains("layer1.9.conv1.weight"));
  EXPECT_THROW(classify::make_resnet(options_from_json<classify::ResNetOptions>(
                   "resnet19", {}, classify::ResNetOptions().depth(19))),
               InputError);
}

TEST_F(ModelOptions, NonDefaultFsrcnnHasTheCountWorkedOutByHand) {
  // d = 32, s = 8, m = 3 on RGB (scale does not change the count):
  //   first_part  conv 3→32 5×5: 3·32·25 + 32 = 2432, PReLU 32            → 2464
  //   mid_part.0  conv 32→8 1×1: 256 + 8, PReLU 8                          →  272
  //   3 × (conv 8→8 3×3: 576 + 8, PReLU 8)                                 → 1776
  //   mid_part.7  conv 8→32 1×1: 256 + 32, PReLU 32                        →  320
  //   last_part   transposed conv 32→3 9×9: 32·3·81 + 3                    → 7779
  auto m = create_model("fsrcnn", {{"scale", 2}, {"channels", 3}, {"d", 32}, {"s", 8}, {"m", 3}});
  EXPECT_EQ(count_parameters(*m), 2464 + 272 + 1776 + 320 + 7779);
  EXPECT_EQ(count_parameters(*m), 12611);
  // VDSR depth 5 on luma: head 1→64 (576 + 64), 3 × body 64→64 (36864 + 64), tail 64→1 (576 + 1).
  EXPECT_EQ(count_parameters(*sr::make_vdsr(sr::VdsrOptions().depth(5))), 640 + 3 * 36928 + 577);
}

TEST_F(ModelOptions, NonDefaultDenseNetHasTheCountWorkedOutByHand) {
  // depth 16 → 2 bottleneck layers per block, growth 8 (4k = 32), 5 classes; channels start at
  // 2k = 16. Bottleneck with c inputs: bn 2c, conv 1×1 c·32, bn 64, conv 3×3 32·9·8 = 2304.
  //   conv1 3→16 3×3                                                        432
  //   block: layer c=16 (32 + 512 + 64 + 2304) + layer c=24 (48 + 768 + 64 + 2304) = 6096, → 32
  //   transition 32→16: bn 64 + conv 512                                    576
  //   three blocks, two transitions, final bn 2·32, fc 32·5 + 5
  auto m = create_model("densenet_cifar", {{"depth", 16}, {"growth", "8"}, {"num_classes", 5}});
  EXPECT_EQ(count_parameters(*m), 432 + 3 * 6096 + 2 * 576 + 64 + 165);
  EXPECT_EQ(count_parameters(*m), 20101);
  // resnet20_cifar with 100 classes: the published 269,722 with fc 64→10 swapped for 64→100.
  EXPECT_EQ(count_parameters(*create_model("resnet20_cifar", {{"num_classes", 100}})),
            269'722 - (64 * 10 + 10) + (64 * 100 + 100));
}

TEST_F(ModelOptions, UnknownArgsNameTheValidOnes) {
  EXPECT_EQ(error_of("fsrcnn", {{"q", 3}}),
            "model fsrcnn has no option 'q'; valid options: scale, channels, d, s, m");
  EXPECT_EQ(error_of("srcnn", {{"d", 3}}),
            "model srcnn has no option 'd'; valid options: scale, channels");
  EXPECT_EQ(error_of("vdsr", {{"layers", 3}}),
            "model vdsr has no option 'layers'; valid options: scale, channels, depth");
  EXPECT_EQ(error_of("densenet_cifar", {{"width", 2}}),
            "model densenet_cifar has no option 'width'; valid options: num_classes, input_size, "
            "depth, growth");
  EXPECT_EQ(error_of("resnet20_cifar", {{"depth", 32}}),
            "model resnet20_cifar has no option 'depth'; valid options: num_classes, input_size, "
            "shortcut");
  EXPECT_EQ(error_of("lenet5", {{"classes", 3}}),
            "model lenet5 has no option 'classes'; valid options: num_classes, input_size");
}

TEST_F(ModelOptions, BadValuesAreInputErrorsNamingTheOption) {
  EXPECT_EQ(error_of("fsrcnn", {{"m", "x"}}),
            "model fsrcnn: option 'm' has an invalid value \"x\"");
  EXPECT_EQ(error_of("fsrcnn", {{"m", 65}}),
            "model fsrcnn: option 'm' = 65 is out of range [0, 64]");
  EXPECT_EQ(error_of("espcn", {{"scale", "8"}}),
            "model espcn: option 'scale' = 8 is out of range [2, 4]");
  EXPECT_EQ(error_of("srcnn", {{"channels", 2}}),
            "SR models take channels 1 (luma) or 3 (RGB), got 2");
  EXPECT_EQ(error_of("alexnet", {{"input_size", 62}}),
            "model alexnet: option 'input_size' = 62 is out of range [63, 4096]");
  EXPECT_EQ(error_of("resnet18", {{"num_classes", 0}}),
            "model resnet18: option 'num_classes' = 0 is out of range [1, 100000]");
  EXPECT_NE(error_of("densenet_cifar", {{"depth", 41}})
                .find("model densenet_cifar: depth must be 6n + 4"),
            std::string::npos);
  EXPECT_EQ(error_of("fsrcnn", nlohmann::json::array({1})),
            "model fsrcnn: options must be a mapping");
}

TEST_F(ModelOptions, TorchScriptArgsComeFromTheFamiliesImportHooks) {
  // All checked before the file is read: "family" takes auto, each hook's family and model, and
  // each hook adds its own arg, in the order of the families.
  const std::string name = "torchscript:/nonexistent/model.pt";
  EXPECT_EQ(error_of(name, {{"family", "deblur"}}),
            "model torchscript: option 'family' is 'deblur'; valid: auto, classify, sr, model");
  EXPECT_EQ(error_of(name, {{"classes", 3}}),
            "model torchscript has no option 'classes'; valid options: file, crc32c, family, "
            "input_size, channels, num_classes, scale");
  EXPECT_EQ(error_of(name, {{"num_classes", -1}}),
            "model torchscript: option 'num_classes' = -1 is out of range [0, 16777216]");
  EXPECT_EQ(error_of(name, {{"scale", 17}}),
            "model torchscript: option 'scale' = 17 is out of range [0, 16]");
}

TEST_F(ModelOptions, ImportHooksRecogniseAndResolveTheirFamilysOutputs) {
  const std::vector<int64_t> input{1, 3, 32, 32};
  const auto classify = classify::classify_import_hook("classify");
  const auto sr = sr::sr_import_hook("sr");
  EXPECT_EQ(sr.input_size, 32);
  EXPECT_EQ(classify.input_size, 0);
  const auto scores = torch::zeros({1, 10});
  const auto x3 = torch::zeros({1, 3, 96, 96});
  EXPECT_TRUE(classify.recognises(scores, input));
  EXPECT_FALSE(classify.recognises(x3, input));
  EXPECT_TRUE(sr.recognises(x3, input));
  EXPECT_FALSE(sr.recognises(scores, input));
  // x5, another channel count, or a non-square output is no SR model's.
  EXPECT_FALSE(sr.recognises(torch::zeros({1, 3, 160, 160}), input));
  EXPECT_FALSE(sr.recognises(torch::zeros({1, 1, 96, 96}), input));
  EXPECT_FALSE(sr.recognises(torch::zeros({1, 3, 96, 64}), input));
  EXPECT_EQ(classify.resolve(scores, input, 0, "f.pt"), 10);
  EXPECT_EQ(sr.resolve(x3, input, 3, "f.pt"), 3);
  const auto error = [&](const ImportHook& h, const at::Tensor& out, int64_t given) {
    try {
      h.resolve(out, input, given, "f.pt");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error(classify, scores, 7), "f.pt: the model gives 10 class scores, not num_classes 7");
  EXPECT_EQ(error(classify, x3, 0),
            "f.pt: family classify needs [N, classes] outputs; its forward gives 4-D ones");
  EXPECT_EQ(error(sr, x3, 2), "f.pt: the model upscales x3, not x2");
  EXPECT_EQ(error(sr, scores, 0),
            "f.pt: family sr needs an output of the input's channels, 2-4 times its height and "
            "width");
}

}  // namespace igb::models
