// The two parts of a deblurring training step that igb computes differently from the stock
// LibTorch call, each against that call in the same run (alternating blocks, medians):
//  - DeblurGAN's last convolution (7×7, ngf → 3 channels, reflect-padded input) forward and
//    backward: torch::conv2d against conv2d_space_to_depth (core/conv_space_to_depth.h);
//  - the generator's adversarial pass through the critic (forward on the restored batch, backward
//    to it): with the critic's weight gradients, as a plain call computes them, against
//    FrozenParameters, which computes the input's gradient only (models/deblur/deblur_solver.cpp);
//  - the pixel shuffles of the sub-pixel transposed convolutions and the space-to-depth one:
//    torch::pixel_shuffle / pixel_unshuffle against fast_pixel_shuffle / fast_pixel_unshuffle
//    (core/tensor_util.h), forward and backward, on the generator's largest maps;
//  - a training crop's fresh motion blur (a 9-pixel straight kernel on the crop's window, as
//    data loading makes it on its own thread): a depthwise torch::conv2d of the kernel's support
//    against blur_image's sum of shifted copies, one per non-zero tap (data/motion_blur.h).
// Prints a table and one JSON line.
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <tuple>

#include <CLI/CLI.hpp>

#include "core/conv_space_to_depth.h"
#include "core/host.h"
#include "core/table.h"
#include "core/tensor_util.h"
#include "core/train_mode_guard.h"
#include "data/motion_blur.h"
#include "models/model.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Milliseconds per call of `a` and `b`, run in alternating blocks of `per` calls.
std::pair<double, double> compare(const std::function<void()>& a, const std::function<void()>& b,
                                  int64_t rounds, int64_t per) {
  std::vector<double> ta, tb;
  const auto time = [per](const std::function<void()>& f, std::vector<double>& out) {
    for (int64_t i = 0; i < per; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      out.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  };
  for (int64_t i = 0; i < 3; ++i) a(), b();
  for (int64_t r = 0; r < rounds; ++r) time(a, ta), time(b, tb);
  return {median(ta), median(tb)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Deblurring step parts: stock LibTorch calls against igb's, in one run");
  int64_t batch = 8, patch = 64, ngf = 16, threads = 2, rounds = 10, per = 10;
  std::string critic_name = "patchgan_small";
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--patch", patch, "Crop side")->capture_default_str();
  app.add_option("--ngf", ngf, "Channels into the last convolution")->capture_default_str();
  app.add_option("--critic", critic_name)->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--rounds", rounds, "Alternating blocks per side")->capture_default_str();
  app.add_option("--per", per, "Calls per block")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  torch::set_num_threads(static_cast<int>(threads));
  igb::tune_allocator();
  torch::manual_seed(0);

  // The last convolution, on its reflect-padded input, with its gradients.
  auto x = torch::randn({batch, ngf, patch + 6, patch + 6}).requires_grad_();
  auto w = (torch::randn({3, ngf, 7, 7}) * 0.002).requires_grad_();
  auto b = torch::zeros({3}).requires_grad_();
  const auto grad_out = torch::randn({batch, 3, patch, patch});
  const auto conv_stock = [&] { torch::conv2d(x, w, b).backward(grad_out); };
  const auto conv_ours = [&] { igb::conv2d_space_to_depth(x, w, b, 2).backward(grad_out); };
  const auto [conv_a, conv_b] = compare(conv_stock, conv_ours, rounds, per);

  // The adversarial pass: critic forward on the restored batch, backward to it.
  igb::models::register_builtin_models();
  auto critic = igb::models::create_model(critic_name, {});
  critic->train();
  auto restored = torch::rand({batch, 3, patch, patch}).requires_grad_();
  const auto adversarial = [&] { (critic->forward(restored) - 1).pow(2).mean().backward(); };
  const auto adv_stock = [&] { adversarial(); };
  const auto adv_ours = [&] {
    torch::Tensor score;
    {
      igb::FrozenParameters frozen(*critic);
      score = critic->forward(restored);
    }
    (score - 1).pow(2).mean().backward();
  };
  const auto [adv_a, adv_b] = compare(adv_stock, adv_ours, rounds, per);

  // The generator's largest shuffles with their backward passes: the last transposed conv's
  // output phases [B, 4·ngf, H/2, W/2] into [B, ngf, H, W], and the space-to-depth view of the
  // last conv's padded input [B, ngf, H + 8, W + 8].
  auto phases = torch::randn({batch, 4 * ngf, patch / 2, patch / 2}).requires_grad_();
  auto padded = torch::randn({batch, ngf, patch + 8, patch + 8}).requires_grad_();
  const auto g_shuffled = torch::randn({batch, ngf, patch, patch});
  const auto g_cells = torch::randn({batch, 4 * ngf, patch / 2 + 4, patch / 2 + 4});
  const auto shuffle_stock = [&] {
    torch::pixel_shuffle(phases, 2).backward(g_shuffled);
    torch::pixel_unshuffle(padded, 2).backward(g_cells);
  };
  const auto shuffle_ours = [&] {
    igb::fast_pixel_shuffle(phases, 2).backward(g_shuffled);
    igb::fast_pixel_unshuffle(padded, 2).backward(g_cells);
  };
  const auto [shuffle_a, shuffle_b] = compare(shuffle_stock, shuffle_ours, rounds, per);

  // A training crop's blur, on one thread as a loader builds it.
  double blur_a = 0, blur_b = 0;
  {
    const int threads_before = torch::get_num_threads();
    torch::set_num_threads(1);
    const int64_t margin = 10;  // data/deblur_data.cpp blurs the crop's window, kernel radius 10
    const auto window = torch::rand({3, patch + 2 * margin, patch + 2 * margin});
    const auto kernel = igb::data::support_of(igb::data::linear_motion_kernel(21, 9, 30));
    const int64_t k = kernel.size(0), r = k / 2;
    const auto weight = kernel.flip({0, 1}).view({1, 1, k, k}).expand({3, 1, k, k}).contiguous();
    const auto blur_stock = [&] {
      const auto padded = torch::nn::functional::pad(
          window.unsqueeze(0),
          torch::nn::functional::PadFuncOptions({r, r, r, r}).mode(torch::kReflect));
      torch::conv2d(padded, weight, at::Tensor(), at::IntArrayRef{1}, at::IntArrayRef{0},
                    at::IntArrayRef{1}, 3);
    };
    const auto blur_ours = [&] { igb::data::blur_image(window, kernel); };
    std::tie(blur_a, blur_b) = compare(blur_stock, blur_ours, rounds, per);
    torch::set_num_threads(threads_before);
  }

  igb::Table t;
  t.columns = {"part", "stock (ms)", "igb (ms)", "speed-up"};
  t.rows.push_back({"last conv 7x7 " + std::to_string(ngf) + "->3, fwd+bwd", igb::fixed(conv_a, 3),
                    igb::fixed(conv_b, 3), igb::fixed(conv_a / conv_b, 2) + "x"});
  t.rows.push_back({"adversarial pass through " + critic_name, igb::fixed(adv_a, 3),
                    igb::fixed(adv_b, 3), igb::fixed(adv_a / adv_b, 2) + "x"});
  t.rows.push_back({"pixel shuffle + unshuffle, fwd+bwd", igb::fixed(shuffle_a, 3),
                    igb::fixed(shuffle_b, 3), igb::fixed(shuffle_a / shuffle_b, 2) + "x"});
  t.rows.push_back({"crop blur, 9-px line, 1 thread", igb::fixed(blur_a, 3), igb::fixed(blur_b, 3),
                    igb::fixed(blur_a / blur_b, 2) + "x"});
  std::cout << "batch " << batch << ", " << patch << "x" << patch << ", " << threads
            << " threads, medians of " << rounds * per << " calls each\n"
            << t.to_text();
  std::cout << "{\"bench\": \"deblur_step\", \"batch\": " << batch << ", \"threads\": " << threads
            << ", \"last_conv_ms\": [" << conv_a << ", " << conv_b << "], \"adversarial_ms\": ["
            << adv_a << ", " << adv_b << "], \"shuffle_ms\": [" << shuffle_a << ", " << shuffle_b
            << "], \"crop_blur_ms\": [" << blur_a << ", " << blur_b << "]}" << std::endl;
  return 0;
}
