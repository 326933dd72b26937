#include "core/jit_containers.h"

#include <torch/csrc/jit/ir/ir.h>

namespace igb {

bool run_container_node(const torch::jit::Node* node, torch::jit::Stack& stack) {
  const size_t n = node->inputs().size();
  switch (node->kind()) {
    case c10::prim::ListConstruct: {
      c10::impl::GenericList list(node->output()->type()->containedType(0));
      list.reserve(n);
      for (size_t i = stack.size() - n; i < stack.size(); ++i) list.push_back(stack[i]);
      stack.resize(stack.size() - n);
      stack.emplace_back(std::move(list));
      return true;
    }
    case c10::prim::TupleConstruct: {
      std::vector<c10::IValue> items(stack.end() - static_cast<std::ptrdiff_t>(n), stack.end());
      stack.resize(stack.size() - n);
      stack.emplace_back(c10::ivalue::Tuple::create(std::move(items)));
      return true;
    }
    case c10::prim::ListUnpack: {
      auto list = stack.back().toList();
      stack.pop_back();
      for (const auto& item : list) stack.push_back(item);
      return true;
    }
    case c10::prim::TupleUnpack: {
      auto tuple = stack.back().toTuple();
      stack.pop_back();
      for (const auto& item : tuple->elements()) stack.push_back(item);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace igb
