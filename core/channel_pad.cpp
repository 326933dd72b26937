#include "core/channel_pad.h"

#include "core/trace_scope.h"

namespace igb {

torch::Tensor ChannelPadImpl::forward(const torch::Tensor& x) {
  TraceScope scope(this);
  std::vector<int64_t> pad(2 * (x.dim() - 1), 0);
  // Pad pairs run from the last dimension to the first; channels are dimension 1.
  pad[pad.size() - 2] = before_;
  pad[pad.size() - 1] = after_;
  return torch::constant_pad_nd(x, pad);
}

}  // namespace igb
