#include "core/json_reader.h"

#include "core/fs.h"

namespace igb {

std::string json_error_text(const std::exception& e) {
  std::string text = e.what();
  if (text.rfind("[json.exception.", 0) == 0) {
    const auto end = text.find("] ");
    if (end != std::string::npos) text = text.substr(end + 2);
  }
  return text.substr(0, text.find('\n'));
}

nlohmann::json parse_json(const std::string& text, const std::string& file) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file + ": not JSON (" + json_error_text(e) + ")");
  }
}

nlohmann::json load_json_file(const std::filesystem::path& path) {
  return parse_json(read_input_file(path), path.string());
}

JsonReader::JsonReader(const nlohmann::json& value, std::string file, std::string path)
    : value_(&value), file_(std::move(file)), path_(std::move(path)) {
  if (!value.is_object()) throw InputError(file_ + ": " + path_ + " must be a JSON object");
}

bool JsonReader::has(const std::string& key) const { return value_->contains(key); }

const nlohmann::json& JsonReader::raw(const std::string& key) const {
  if (!has(key)) throw error(key, "is missing");
  return value_->at(key);
}

JsonReader JsonReader::object(const std::string& key) const {
  const auto& v = raw(key);
  if (!v.is_object()) throw error(key, "must be an object");
  return JsonReader(v, file_, path_ + "." + key);
}

std::vector<JsonReader> JsonReader::list(const std::string& key) const {
  const auto& v = raw(key);
  if (!v.is_array()) throw error(key, "must be a list");
  std::vector<JsonReader> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = path_ + "." + key + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) throw InputError(file_ + ": " + at + " must be an object");
    out.emplace_back(v[i], file_, at);
  }
  return out;
}

InputError JsonReader::error(const std::string& key, const std::string& what) const {
  return InputError(file_ + ": " + path_ + "." + key + " " + what);
}

}  // namespace igb
