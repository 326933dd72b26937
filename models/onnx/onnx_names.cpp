#include "models/onnx/onnx_names.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace igb::models::onnx_import {

namespace {

/// A module that only holds others, for the dotted names of initializers ("layer1.0.conv1").
class OnnxScopeImpl : public torch::nn::Module {};

bool has_name(torch::nn::Module& m, const std::string& name) {
  return m.named_children().contains(name) || m.named_parameters(false).contains(name) ||
         m.named_buffers(false).contains(name);
}

std::string unique_in(torch::nn::Module& m, const std::string& name) {
  std::string out = name;
  for (int i = 2; has_name(m, out); ++i) out = name + "_" + std::to_string(i);
  return out;
}

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == '.') {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

/// Whether an initializer's name was made up by an exporter ("onnx::Conv_193", "123"), not taken
/// from the model's parameters.
bool generated_name(const std::string& name) {
  if (name.find("::") != std::string::npos) return true;
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

}  // namespace

std::string legal_name(const std::string& name, bool keep_dots) {
  std::string out;
  for (char c : name) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (keep_dots && c == '.');
    out += ok ? c : '_';
  }
  return out.empty() ? "_" : out;
}

std::string scope_path(const std::string& node_name) {
  if (node_name.size() < 2 || node_name.front() != '/') return "";
  std::vector<std::string> segments;
  size_t start = 1;
  for (size_t i = 1; i <= node_name.size(); ++i)
    if (i == node_name.size() || node_name[i] == '/') {
      segments.push_back(node_name.substr(start, i - start));
      start = i + 1;
    }
  segments.pop_back();  // the op ("Conv")
  std::vector<std::string> path;
  for (const auto& seg : segments) {
    if (seg.empty()) return "";
    const auto dot = seg.rfind('.');
    if (dot != std::string::npos && !path.empty() && seg.substr(0, dot) == path.back())
      path.push_back(seg.substr(dot + 1));
    else if (dot != std::string::npos && !path.empty() && path.size() >= 2 &&
             seg.substr(0, dot) == path[path.size() - 2] + "." + path.back())
      path.push_back(seg.substr(dot + 1));
    else
      path.push_back(seg);
  }
  std::string out;
  for (const auto& p : path) out += (out.empty() ? "" : ".") + p;
  return out;
}

std::string path_of(const std::string& initializer, const std::string& suffix,
                    const std::string& node_name) {
  if (generated_name(initializer)) {
    const std::string scope = scope_path(node_name);
    if (!scope.empty()) return scope;
  }
  if (initializer.size() > suffix.size() &&
      initializer.compare(initializer.size() - suffix.size(), suffix.size(), suffix) == 0)
    return initializer.substr(0, initializer.size() - suffix.size());
  return initializer;
}

std::string Namer::add_module(const std::string& want, std::shared_ptr<torch::nn::Module> m) {
  m->eval();
  auto parts = split_dots(legal_name(want, true));
  for (auto& p : parts)
    if (p.empty()) p = "_";
  torch::nn::Module* parent = &owner_;
  std::string path;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    auto children = parent->named_children();
    const auto* found = children.find(parts[i]);
    // A scope that is a layer already, or a tensor's name: one flat name instead.
    if ((found && !dynamic_cast<OnnxScopeImpl*>(found->get())) ||
        (!found && has_name(*parent, parts[i])))
      return add_flat(legal_name(want, false), std::move(m));
    if (!found) {
      parent->register_module(parts[i], std::make_shared<OnnxScopeImpl>());
      children = parent->named_children();
      found = children.find(parts[i]);
    }
    path += parts[i] + ".";
    parent = found->get();
  }
  const std::string leaf = unique_in(*parent, parts.back());
  parent->register_module(leaf, std::move(m));
  return path + leaf;
}

std::string Namer::add_buffer(const std::string& want, const at::Tensor& t) {
  const std::string name = unique_in(owner_, legal_name(want, false));
  owner_.register_buffer(name, t);
  return name;
}

std::string Namer::add_flat(const std::string& name, std::shared_ptr<torch::nn::Module> m) {
  const std::string leaf = unique_in(owner_, name);
  owner_.register_module(leaf, std::move(m));
  return leaf;
}

}  // namespace igb::models::onnx_import
