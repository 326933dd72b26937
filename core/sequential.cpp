#include "core/sequential.h"

#include "core/trace_scope.h"

namespace igb {

torch::Tensor SequentialImpl::forward(torch::Tensor x) {
  TORCH_CHECK(!is_empty(), "Cannot call forward() on an empty Sequential");
  for (auto& child : *this) {
    TraceScope scope(child.ptr().get());
    x = child.forward(std::move(x));
  }
  return x;
}

}  // namespace igb
