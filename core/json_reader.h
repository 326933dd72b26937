#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/finite_number.h"

namespace igb {

/// Parses the JSON `text` of `file` (named in the message), the one way igb reads the JSON files
/// its commands write (plans, manifests, cost files): InputError "FILE: not JSON (parse error at
/// line L, column C: …)" in our words, without the library's exception tag.
nlohmann::json parse_json(const std::string& text, const std::string& file);

/// Reads `path` and parses it as parse_json does; InputError "FILE: cannot be read" when it cannot
/// be opened.
nlohmann::json load_json_file(const std::filesystem::path& path);

/// The message of a JSON library error without its "[json.exception.…] " tag, first line only.
std::string json_error_text(const std::exception& e);

/// Reads one JSON object of a file igb wrote, strictly: every error names the file, the key path
/// and what was expected, in one line.
///
///   JsonReader plan(load_json_file(path), path.string(), "plan");
///   std::string model = plan.get<std::string>("model");
///   for (const auto& d : plan.list("devices")) d.get<double>("ms");
class JsonReader {
 public:
  /// InputError when `value` is not an object.
  JsonReader(const nlohmann::json& value, std::string file, std::string path);

  bool has(const std::string& key) const;
  /// A required key as a T; numbers must be finite.
  template <class T>
  T get(const std::string& key) const {
    if (!has(key)) throw error(key, "is missing");
    return as<T>(value_->at(key), key);
  }
  /// An optional key (absent or null: `fallback`).
  template <class T>
  T get(const std::string& key, T fallback) const {
    if (!has(key) || value_->at(key).is_null()) return fallback;
    return as<T>(value_->at(key), key);
  }
  /// The object under a required key.
  JsonReader object(const std::string& key) const;
  /// The objects of a required list.
  std::vector<JsonReader> list(const std::string& key) const;
  /// The raw value of a required key.
  const nlohmann::json& raw(const std::string& key) const;

  /// "FILE: PATH.KEY WHAT".
  InputError error(const std::string& key, const std::string& what) const;
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }

 private:
  template <class T>
  T as(const nlohmann::json& v, const std::string& key) const {
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) throw error(key, "must be true or false");
      return v.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) throw error(key, "must be an integer");
      return v.get<T>();
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) throw error(key, "must be a number");
      const T x = v.get<T>();
      if (!finite_number(x)) throw error(key, "must be a finite number");
      return x;
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) throw error(key, "must be a string");
      return v.get<std::string>();
    } else {
      if (!v.is_array()) throw error(key, "must be a list");
      T out;
      for (size_t i = 0; i < v.size(); ++i)
        out.push_back(as<typename T::value_type>(v[i], key + "[" + std::to_string(i) + "]"));
      return out;
    }
  }

  const nlohmann::json* value_;
  std::string file_, path_;
};

}  // namespace igb
