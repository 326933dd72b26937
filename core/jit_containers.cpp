#include "core/jit_containers.h"

#include <torch/csrc/jit/ir/constants.h>
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

namespace {

// A prim::ListConstruct whose every input is a constant that `one` reads.
template <class T, class One>
std::optional<std::vector<T>> constructed_list(const torch::jit::Value* v, One one) {
  if (v->node()->kind() != c10::prim::ListConstruct) return std::nullopt;
  std::vector<T> out;
  for (const auto* in : v->node()->inputs()) {
    auto iv = torch::jit::toIValue(in);
    if (!iv) return std::nullopt;
    const std::optional<T> x = one(*iv);
    if (!x) return std::nullopt;
    out.push_back(*x);
  }
  return out;
}

std::optional<int64_t> one_int(const c10::IValue& i) {
  return i.isInt() ? std::optional<int64_t>(i.toInt()) : std::nullopt;
}

std::optional<double> one_double(const c10::IValue& i) {
  return i.isDouble() ? std::optional<double>(i.toDouble()) : std::nullopt;
}

}  // namespace

std::optional<std::vector<int64_t>> constant_ints(const torch::jit::Value* v) {
  if (auto iv = torch::jit::toIValue(v)) {
    if (iv->isIntList()) return iv->toIntVector();
    if (iv->isInt()) return std::vector<int64_t>{iv->toInt()};
    return std::nullopt;
  }
  return constructed_list<int64_t>(v, one_int);
}

std::optional<std::vector<double>> constant_doubles(const torch::jit::Value* v) {
  if (auto iv = torch::jit::toIValue(v)) {
    if (iv->isDoubleList()) return iv->toDoubleVector();
    return std::nullopt;
  }
  return constructed_list<double>(v, one_double);
}

const torch::jit::Value* schema_argument(const torch::jit::Node* node, const char* name) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema) return nullptr;
  auto i = schema->argumentIndexWithName(name);
  if (!i || static_cast<size_t>(*i) >= node->inputs().size()) return nullptr;
  return node->input(static_cast<size_t>(*i));
}

std::optional<double> constant_number(const torch::jit::Value* v) {
  if (!v) return std::nullopt;
  auto iv = torch::jit::toIValue(v);
  if (!iv) return std::nullopt;
  if (iv->isInt()) return static_cast<double>(iv->toInt());
  if (iv->isDouble()) return iv->toDouble();
  return std::nullopt;
}

}  // namespace igb
