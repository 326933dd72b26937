// The two parts of a deblurring training step that igb computes differently from the stock
// LibTorch call, each against that call in the same run (alternating blocks, medians):
//  - DeblurGAN's last convolution (7×7, ngf → 3 channels, reflect-padded input) forward and
//    backward: torch::conv2d against conv2d_space_to_depth (core/conv_space_to_depth.h);
//  - the generator's adversarial pass through the critic (forward on the restored batch, backward
//    to it): with the critic's weight gradients, as a plain call computes them, against
//    FrozenParameters, which computes the input's gradient only (models/deblur/deblur_solver.cpp).
// Prints a table and one JSON line.
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>

#include <CLI/CLI.hpp>

#include "core/conv_space_to_depth.h"
#include "core/runtime.h"
#include "core/table.h"
#include "core/train_mode_guard.h"
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

  igb::Table t;
  t.columns = {"part", "stock (ms)", "igb (ms)", "speed-up"};
  t.rows.push_back({"last conv 7x7 " + std::to_string(ngf) + "->3, fwd+bwd", igb::fixed(conv_a, 3),
                    igb::fixed(conv_b, 3), igb::fixed(conv_a / conv_b, 2) + "x"});
  t.rows.push_back({"adversarial pass through " + critic_name, igb::fixed(adv_a, 3),
                    igb::fixed(adv_b, 3), igb::fixed(adv_a / adv_b, 2) + "x"});
  std::cout << "batch " << batch << ", " << patch << "x" << patch << ", " << threads
            << " threads, medians of " << rounds * per << " calls each\n"
            << t.to_text();
  std::cout << "{\"bench\": \"deblur_step\", \"batch\": " << batch << ", \"threads\": " << threads
            << ", \"last_conv_ms\": [" << conv_a << ", " << conv_b << "], \"adversarial_ms\": ["
            << adv_a << ", " << adv_b << "]}" << std::endl;
  return 0;
}
