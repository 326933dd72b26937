#include "deploy/serve/tensor_codec.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace igb::deploy {

namespace {

/// The largest tensor a payload may describe: 2^28 values (1 GiB of float32), so a forged shape
/// cannot make the receiver allocate without bound.
constexpr int64_t kMaxValues = int64_t{1} << 28;

int64_t value_bytes(TransferPrecision p) {
  return p == TransferPrecision::kFp32 ? 4 : p == TransferPrecision::kFp16 ? 2 : 1;
}
int64_t header_size(TransferPrecision p) { return p == TransferPrecision::kInt8 ? 8 : 0; }

/// Rows and columns of the CSR view: rows of the last dimension.
std::pair<int64_t, int64_t> matrix(const std::vector<int64_t>& shape, int64_t numel) {
  const int64_t cols = shape.empty() ? 1 : std::max<int64_t>(1, shape.back());
  return {numel / cols, cols};
}

template <class T>
void put(std::string& out, const T* p, int64_t n) {
  out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n) * sizeof(T));
}

}  // namespace

EncodedTensor encode_tensor(const at::Tensor& t, TransferPrecision precision) {
  const at::Tensor x = t.detach().to(at::kFloat).cpu().contiguous();
  EncodedTensor e;
  e.shape = x.sizes().vec();
  e.precision = precision;
  const int64_t n = x.numel();
  if (n > kMaxValues)
    throw InputError("a tensor of " + std::to_string(n) + " values is too large to send");
  std::string header;
  at::Tensor v;  // the values as sent
  if (precision == TransferPrecision::kInt8) {
    const float amax = n ? x.abs().max().item<float>() : 0.0f;
    const float scale = amax > 0 && std::isfinite(amax) ? amax / 127.0f : 1.0f;
    const int32_t zero_point = 0;
    put(header, &scale, 1);
    put(header, &zero_point, 1);
    v = (x / scale).round().clamp(-127, 127).to(at::kChar).contiguous();
  } else {
    v = precision == TransferPrecision::kFp16 ? x.to(at::kHalf).contiguous() : x;
  }
  const int64_t eb = value_bytes(precision);
  const auto [rows, cols] = matrix(e.shape, n);
  const auto nz = v.ne(0).flatten();
  const int64_t nnz = nz.sum().item<int64_t>();
  const int64_t dense = n * eb, csr = nnz * (eb + 4) + (rows + 1) * 4;
  e.payload = header;
  if (csr >= dense) {
    e.payload.append(static_cast<const char*>(v.data_ptr()), static_cast<size_t>(dense));
    return e;
  }
  e.sparse = true;
  const auto idx = nz.nonzero().flatten().contiguous();  // int64 flat indices, row-major
  const auto values = v.flatten().index_select(0, idx).contiguous();
  e.payload.append(static_cast<const char*>(values.data_ptr()), static_cast<size_t>(nnz * eb));
  const auto columns = idx.remainder(cols).to(at::kInt).contiguous();
  put(e.payload, columns.data_ptr<int32_t>(), nnz);
  const auto per_row = at::bincount(idx.div(cols, "floor"), {}, rows).to(at::kInt);
  const auto pointers =
      at::cat({at::zeros({1}, at::kInt), per_row.cumsum(0, at::kInt)}).contiguous();
  put(e.payload, pointers.data_ptr<int32_t>(), rows + 1);
  return e;
}

at::Tensor decode_tensor(const EncodedTensor& e, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : e.shape) {
    if (d < 0) throw InputError(what + ": negative dimension " + std::to_string(d));
    if (d > 0 && n > kMaxValues / d)
      throw InputError(what + ": a tensor of more than " + std::to_string(kMaxValues) + " values");
    n *= d;
  }
  const int64_t eb = value_bytes(e.precision), hb = header_size(e.precision);
  const auto size = static_cast<int64_t>(e.payload.size());
  const char* p = e.payload.data();
  float scale = 1;
  if (hb) {
    if (size < hb) throw InputError(what + ": truncated (no int8 scale)");
    std::memcpy(&scale, p, sizeof(float));
    if (!std::isfinite(scale) || scale <= 0)
      throw InputError(what + ": int8 scale " + std::to_string(scale) +
                       " is not a positive number");
  }
  const at::ScalarType type = e.precision == TransferPrecision::kFp32   ? at::kFloat
                              : e.precision == TransferPrecision::kFp16 ? at::kHalf
                                                                        : at::kChar;
  at::Tensor v = at::zeros(e.shape, at::TensorOptions().dtype(type));
  if (!e.sparse) {
    if (size != hb + n * eb)
      throw InputError(what + ": " + std::to_string(size - hb) + " bytes of values for " +
                       std::to_string(n) + " values of " + std::to_string(eb) + " bytes");
    std::memcpy(v.data_ptr(), p + hb, static_cast<size_t>(n * eb));
  } else {
    const auto [rows, cols] = matrix(e.shape, n);
    const int64_t rest = size - hb - (rows + 1) * 4;
    if (rest < 0 || rest % (eb + 4) != 0 || rest / (eb + 4) > n)
      throw InputError(what + ": " + std::to_string(size) + " bytes do not make a CSR tensor of " +
                       std::to_string(rows) + " rows");
    const int64_t nnz = rest / (eb + 4);
    const char* values = p + hb;
    std::vector<int32_t> col(static_cast<size_t>(nnz)), ptr(static_cast<size_t>(rows + 1));
    std::memcpy(col.data(), values + nnz * eb, col.size() * 4);
    std::memcpy(ptr.data(), values + nnz * (eb + 4), ptr.size() * 4);
    if (ptr.front() != 0 || ptr.back() != nnz)
      throw InputError(what + ": CSR row pointers do not run from 0 to " + std::to_string(nnz));
    auto* out = static_cast<char*>(v.data_ptr());
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t a = ptr[static_cast<size_t>(r)], b = ptr[static_cast<size_t>(r + 1)];
      if (b < a || b - a > cols)
        throw InputError(what + ": CSR row " + std::to_string(r) + " has a bad row pointer");
      for (int32_t k = a; k < b; ++k) {
        const int32_t c = col[static_cast<size_t>(k)];
        if (c < 0 || c >= cols || (k > a && c <= col[static_cast<size_t>(k - 1)]))
          throw InputError(what + ": CSR row " + std::to_string(r) + " has column " +
                           std::to_string(c) + " out of order or outside 0.." +
                           std::to_string(cols - 1));
        std::memcpy(out + (r * cols + c) * eb, values + k * eb, static_cast<size_t>(eb));
      }
    }
  }
  at::Tensor x = v.to(at::kFloat);
  return e.precision == TransferPrecision::kInt8 ? x * scale : x;
}

EncodedTensor DiffEncoder::encode(const at::Tensor& t) {
  const at::Tensor x = t.detach().to(at::kFloat).cpu().contiguous();
  const bool diff = previous_.defined() && previous_.sizes() == x.sizes();
  at::Tensor d = diff ? x - previous_ : x;
  if (diff && precision_ == TransferPrecision::kInt8) {
    // What the receiver holds is within half an int8 step of the frame; a correction smaller
    // than that is not sent, so the rounding of earlier frames does not make every difference
    // dense, and the error stays within half a step of this frame's own scale.
    const double half_step = x.abs().max().item<double>() / 127 / 2;
    d = d.masked_fill(d.abs().le(half_step), 0);
  }
  EncodedTensor e = encode_tensor(d, precision_);
  e.difference = diff;
  // What the receiver will hold, rounding included.
  const at::Tensor got = decode_tensor(e, "frame");
  previous_ = diff ? previous_ + got : got;
  return e;
}

at::Tensor DiffDecoder::decode(const EncodedTensor& e, const std::string& what) {
  at::Tensor got = decode_tensor(e, what);
  if (e.difference) {
    if (!previous_.defined())
      throw InputError(what + ": a difference arrived before any whole tensor");
    if (previous_.sizes() != got.sizes())
      throw InputError(what + ": a difference of another shape than the tensor held");
    got = previous_ + got;
  }
  previous_ = got;
  return got;
}

}  // namespace igb::deploy
