#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>

#include "core/error.h"
#include "deploy/serve/tensor_codec.h"

namespace igb::deploy {
namespace {

/// A [2, 4, 8, 8] activation with `zeros` of its values zero.
at::Tensor sparse_activation(double zeros) {
  torch::manual_seed(4);
  const auto x = torch::rand({2, 4, 8, 8});
  return x * torch::rand({2, 4, 8, 8}).ge(zeros).to(torch::kFloat);
}

TEST(TensorCodec, DenseAndCsrRoundTripAndCostWhatThePartitionerCounts) {
  for (double zeros : {0.1, 0.9}) {
    const auto x = sparse_activation(zeros);
    const auto e = encode_tensor(x, TransferPrecision::kFp32);
    EXPECT_EQ(e.sparse, zeros > 0.5);
    EXPECT_TRUE(torch::equal(decode_tensor(e, "t"), x));
    const double nnz = static_cast<double>(x.ne(0).sum().item<int64_t>());
    EXPECT_EQ(static_cast<double>(e.payload.size()),
              encoded_bytes({2, 4, 8, 8}, nnz, TransferPrecision::kFp32));
  }
  // FP16 and INT8: the partitioner's sizes too, values within their rounding.
  const auto x = sparse_activation(0.9);
  const auto h = encode_tensor(x, TransferPrecision::kFp16);
  EXPECT_LT((decode_tensor(h, "t") - x).abs().max().item<double>(), 1e-3);
  const auto q = encode_tensor(x, TransferPrecision::kInt8);
  const double scale = x.abs().max().item<double>() / 127;
  EXPECT_LE((decode_tensor(q, "t") - x).abs().max().item<double>(), scale / 2 + 1e-7);
  EXPECT_EQ(static_cast<double>(q.payload.size()),
            encoded_bytes({2, 4, 8, 8}, static_cast<double>(x.ne(0).sum().item<int64_t>()),
                          TransferPrecision::kInt8));
}

TEST(TensorCodec, DifferencesAreSparseAndDoNotDrift) {
  for (auto p : {TransferPrecision::kFp32, TransferPrecision::kInt8}) {
    DiffEncoder enc(p);
    DiffDecoder dec;
    torch::manual_seed(1);
    at::Tensor frame = torch::rand({1, 8, 16, 16});
    double worst = 0;
    for (int f = 0; f < 6; ++f) {
      if (f > 0) frame = frame + torch::rand({1, 8, 16, 16}).ge(0.95).to(torch::kFloat) * 0.3;
      const auto e = enc.encode(frame);
      EXPECT_EQ(e.difference, f > 0);
      if (f > 0) EXPECT_TRUE(e.sparse) << transfer_precision_name(p) << " frame " << f;
      worst = std::max(worst, (dec.decode(e, "frame") - frame).abs().max().item<double>());
    }
    // FP32: within 1e-5 (one rounding of an add per frame); INT8: half a step of the frame's
    // scale however many frames went before.
    const double bound =
        p == TransferPrecision::kFp32 ? 1e-5 : frame.abs().max().item<double>() / 127 / 2 + 1e-6;
    EXPECT_LE(worst, bound);
  }
}

TEST(TensorCodec, MalformedPayloadsAreRefusedInOneLine) {
  const auto good = encode_tensor(sparse_activation(0.9), TransferPrecision::kFp32);
  ASSERT_TRUE(good.sparse);
  auto bad = good;
  bad.payload.resize(bad.payload.size() - 3);
  EXPECT_THROW(decode_tensor(bad, "t"), InputError);
  bad = good;
  bad.payload.replace(bad.payload.size() - 4, 4, std::string("\x7f\x00\x00\x00", 4));
  EXPECT_THROW(decode_tensor(bad, "t"), InputError);  // the last row pointer
  bad = good;
  const auto nnz = static_cast<int64_t>((good.payload.size() - 65 * 4) / 8);
  const int32_t far = 1000;
  std::memcpy(bad.payload.data() + nnz * 4, &far, 4);  // the first column index
  EXPECT_THROW(decode_tensor(bad, "t"), InputError);
  bad = good;
  bad.shape = {-1, 4};
  EXPECT_THROW(decode_tensor(bad, "t"), InputError);
  bad.shape = {1 << 20, 1 << 20};
  EXPECT_THROW(decode_tensor(bad, "t"), InputError);
  auto q = encode_tensor(torch::ones({4}), TransferPrecision::kInt8);
  const float nan = std::nanf("");
  std::memcpy(q.payload.data(), &nan, 4);
  EXPECT_THROW(decode_tensor(q, "t"), InputError);
  auto diff = good;
  diff.difference = true;
  DiffDecoder dec;
  EXPECT_THROW(dec.decode(diff, "t"), InputError);
  try {
    auto cut = good;
    cut.payload.resize(10);
    decode_tensor(cut, "stage 1 input 'layer2.0.relu'");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    EXPECT_EQ(std::string(e.what()).rfind("stage 1 input 'layer2.0.relu'", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace igb::deploy
