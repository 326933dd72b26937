#include "core/checkpoint.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/pickle_scan.h"
#include "core/text.h"

namespace igb {

namespace {
// Format 2 added the igb_checksums record; format 1 (no checksums) is still read, unverified.
constexpr int64_t kFormatVersion = 2;
constexpr int64_t kFirstChecksummedFormat = 2;
const char* kMetaKey = "igb_meta";
const char* kChecksumRecord = "igb_checksums";

using json = nlohmann::json;
namespace serialize = caffe2::serialize;

std::string shape_str(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? "x" : "") + std::to_string(t.size(i));
  return s + "]";
}

// Reads from a byte buffer, never past its end (LibTorch's MemoryReadAdapter does not check, and a
// corrupt central directory can point anywhere).
class BufferReader final : public serialize::ReadAdapterInterface {
 public:
  explicit BufferReader(std::shared_ptr<const std::string> data) : data_(std::move(data)) {}
  size_t size() const override { return data_->size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= data_->size()) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, data_->size() - pos));
    std::memcpy(buf, data_->data() + pos, n);
    return n;
  }

 private:
  std::shared_ptr<const std::string> data_;
};

// Copies every record of the LibTorch archive `zip` into `out`, adding the igb_checksums record:
// {"algorithm": "crc32c", "records": {"<record name>": <crc>, ...}}.
/// The archive `zip` rewritten with a checksum record, in memory: LibTorch's zip writer throws
/// from its destructor when its sink fails, so it never writes to the disk itself.
std::string with_checksums(const std::shared_ptr<const std::string>& zip) {
  serialize::PyTorchStreamReader reader(std::make_shared<BufferReader>(zip));
  json sums = json::object();
  std::string out;
  out.reserve(zip->size() + 4096);
  serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) -> size_t {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  for (const auto& name : reader.getAllRecords()) {
    auto record = reader.getRecord(name);
    const void* data = std::get<0>(record).get();
    const size_t size = std::get<1>(record);
    sums[name] = crc32c(data, size);
    writer.writeRecord(name, data, size);
  }
  const std::string text = json{{"algorithm", "crc32c"}, {"records", sums}}.dump();
  writer.writeRecord(kChecksumRecord, text.data(), text.size());
  writer.writeEndOfFile();
  return out;
}

/// What the archive holds, read once before LibTorch parses any of it: every record's size and
/// CRC-32C, and the text of the records that are checked by content (pickles, code, checksums).
struct ArchiveRecords {
  std::vector<std::string> names;
  std::map<std::string, size_t> sizes;
  std::map<std::string, uint32_t> crcs;
  std::map<std::string, std::string> texts;
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// Names the archive's own failure in our words: a missing record ("version", a pickle) or an
/// archive that is not one.
[[noreturn]] void unreadable_archive(const std::string& where, const std::exception& e) {
  const std::string what = e.what();
  // LibTorch's words: "failed locating file NAME: ..." or "Expected hasRecord("NAME") to be true".
  for (const auto& [tag, stop] : {std::pair<std::string, char>{"failed locating file ", ':'},
                                  std::pair<std::string, char>{"hasRecord(\"", '"'}}) {
    const size_t at = what.find(tag);
    if (at == std::string::npos) continue;
    const size_t begin = at + tag.size(), end = what.find(stop, begin);
    throw InputError(where + " is corrupt: its archive has no '" +
                     what.substr(begin, end == std::string::npos ? end : end - begin) + "' record");
  }
  // "file in archive is not in a subdirectory archive/: brchive/data/1": a name in the zip
  // directory that does not start with the first record's folder.
  const std::string outside = "is not in a subdirectory ";
  if (const size_t at = what.find(outside); at != std::string::npos) {
    const size_t colon = what.find(": ", at);
    const std::string folder = what.substr(
        at + outside.size(), colon == std::string::npos ? colon : colon - at - outside.size());
    const std::string name = colon == std::string::npos ? "" : first_line(what.substr(colon + 2));
    throw InputError(where + " is corrupt: its zip directory is damaged (record '" + name +
                     "' is not in the archive's folder " + folder + ")");
  }
  throw InputError(where + " is corrupt or truncated: not a readable archive" +
                   library_error_detail(e));
}

ArchiveRecords read_records(const std::shared_ptr<const std::string>& bytes,
                            const std::string& where) {
  ArchiveRecords r;
  std::unique_ptr<serialize::PyTorchStreamReader> reader;
  try {
    reader =
        std::make_unique<serialize::PyTorchStreamReader>(std::make_shared<BufferReader>(bytes));
    r.names = reader->getAllRecords();
  } catch (const std::exception& e) {
    unreadable_archive(where, e);
  }
  for (const auto& name : r.names) {
    try {
      auto record = reader->getRecord(name);
      const auto* data = static_cast<const char*>(std::get<0>(record).get());
      const size_t size = std::get<1>(record);
      r.sizes[name] = size;
      r.crcs[name] = crc32c(data, size);
      if (name == kChecksumRecord || ends_with(name, ".pkl") ||
          (name.rfind("code/", 0) == 0 && ends_with(name, ".py")))
        r.texts[name].assign(data, size);
    } catch (const std::exception& e) {
      throw InputError(where + " is corrupt: record " + name + " cannot be read" +
                       library_error_detail(e));
    }
  }
  return r;
}

// Checks the CRC-32C of every record against igb_checksums. Returns false for an archive without
// igb_checksums (an older igb wrote it).
bool verify_records(const ArchiveRecords& r, const std::string& where) {
  const auto text = r.texts.find(kChecksumRecord);
  if (text == r.texts.end()) return false;
  const json sums = json::parse(text->second, nullptr, /*allow_exceptions=*/false);
  const std::string malformed = where + " is corrupt: record " + kChecksumRecord + " is malformed";
  if (!sums.is_object() || !sums.contains("algorithm") || sums["algorithm"] != "crc32c" ||
      !sums.contains("records") || !sums["records"].is_object())
    throw InputError(malformed);
  const json& expected = sums["records"];
  for (const auto& name : r.names) {
    if (name == kChecksumRecord) continue;
    auto it = expected.find(name);
    if (it == expected.end())
      throw InputError(where + " is corrupt: record " + name + " has no checksum");
    if (!it->is_number_unsigned() || it->get<uint64_t>() > 0xFFFFFFFFu) throw InputError(malformed);
    if (r.crcs.at(name) != it->get<uint64_t>())
      throw InputError(where + " is corrupt: record " + name + " fails its checksum");
  }
  for (const auto& item : expected.items())
    if (!r.sizes.count(item.key()))
      throw InputError(where + " is corrupt: record " + item.key() + " is missing");
  return true;
}

// A checksum catches accidents, not forgery: LibTorch sizes each storage by the element count its
// pickle states and views tensors on it without looking at the record's length, so a short record
// would be read past its end. Every storage a pickle loads must fit in its record and every tensor
// in its storage; and no record may hold TorchScript code (an igb checkpoint holds classes with
// attributes only, and a method such as __setstate__ would run while loading).
void check_tensor_records(const ArchiveRecords& r, const std::string& where) {
  for (const auto& [name, text] : r.texts) {
    if (name.rfind("code/", 0) == 0) {
      if (text.find("def ") != std::string::npos)
        throw InputError(where + " is not an igb checkpoint: record " + name +
                         " holds TorchScript code, which igb never writes and will not run");
      continue;
    }
    if (!ends_with(name, ".pkl")) continue;
    const auto scan = scan_torch_pickle(text, where + ": record " + name);
    const std::string dir = name.substr(0, name.size() - 4) + "/";
    for (const auto& st : scan.storages) {
      const std::string record = dir + st.key;
      const auto size = r.sizes.find(record);
      if (size == r.sizes.end())
        throw InputError(where + " is corrupt: record " + record + " (a tensor's data) is missing");
      const __int128 needed = static_cast<__int128>(st.numel) * st.itemsize;
      if (needed > static_cast<__int128>(size->second))
        throw InputError(where + " is corrupt: record " + record + " holds " +
                         std::to_string(size->second) + " bytes, but its tensor's storage needs " +
                         std::to_string(st.numel) + " elements of " + std::to_string(st.itemsize) +
                         " bytes (" + st.type + ")");
    }
    for (const auto& t : scan.tensors) {
      const auto& st = scan.storages.at(t.storage);
      const int64_t extent = tensor_extent(t);
      if (extent < 0 || extent > st.numel)
        throw InputError(where + " is corrupt: a tensor on record " + dir + st.key +
                         " reaches past the " + std::to_string(st.numel) +
                         " elements of its storage (offset " + std::to_string(t.offset) + ")");
    }
  }
}

std::shared_ptr<const std::string> read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read checkpoint " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InputError("cannot read checkpoint " + path.string());
  return std::make_shared<const std::string>(ss.str());
}

// One warning per file and process: the drivers may open the same checkpoint more than once
// (options read its model, the solver its state). The set is only ever added to.
void warn_unverified(const std::filesystem::path& path) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(path, ec);
  if (!warned.insert(ec ? path.string() : absolute.string()).second) return;
  std::cerr << "warning: checkpoint " << path.string()
            << " has no checksums (written by an older igb); it is loaded unverified" << std::endl;
}

// Typed access to the keys of igb_meta; every wrong type is an InputError naming the key.
const json* find_key(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const std::string& key, const char* want, const json& v) {
  throw InputError("'" + key + "' must be " + want + ", not " + v.type_name());
}

std::string get_string(const json& j, const char* key, bool required) {
  const json* v = find_key(j, key);
  if (!v) {
    if (required) throw InputError("key '" + std::string(key) + "' is missing");
    return "";
  }
  if (!v->is_string()) wrong_type(key, "a string", *v);
  return v->get<std::string>();
}

// The value of `key`, a list or an object; null when it is absent and optional.
const json* get_container(const json& j, const char* key, bool required, bool array) {
  const json* v = find_key(j, key);
  if (!v) {
    if (required) throw InputError("key '" + std::string(key) + "' is missing");
    return nullptr;
  }
  if (array ? !v->is_array() : !v->is_object()) wrong_type(key, array ? "a list" : "an object", *v);
  return v;
}

int64_t get_epoch(const json& j, const char* key, bool required, int64_t hi) {
  const json* v = find_key(j, key);
  if (!v) {
    if (required) throw InputError("key '" + std::string(key) + "' is missing");
    return -1;
  }
  if (!v->is_number_integer()) wrong_type(key, "an integer", *v);
  const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi);
  const int64_t e = too_big ? hi + 1 : v->get<int64_t>();
  if (too_big || e < -1 || e > hi)
    throw InputError("'" + std::string(key) + "' is " + v->dump() + ", which cannot be right (" +
                     "it must be between -1 and " + std::to_string(hi) + ")");
  return e;
}

void check_recipe(const json& r, size_t i) {
  const std::string at = "thinning recipe " + std::to_string(i + 1);
  if (!r.is_object()) throw InputError(at + " must be an object, not " + r.type_name());
  try {
    if (r.contains("kind")) get_string(r, "kind", true);
    for (const auto& t : *get_container(r, "tensors", true, true)) {
      if (!t.is_object()) throw InputError("an entry of 'tensors' must be an object");
      get_string(t, "name", true);
      for (const char* k : {"dim", "size"}) {
        if (!t.contains(k)) throw InputError("key '" + std::string(k) + "' is missing");
        if (!t[k].is_number_integer()) wrong_type(k, "an integer", t[k]);
      }
      for (const auto& k : *get_container(t, "keep", true, true))
        if (!k.is_number_integer()) wrong_type("keep", "a list of integers", k);
    }
    for (const auto& m : *get_container(r, "modules", true, true)) {
      if (!m.is_object()) throw InputError("an entry of 'modules' must be an object");
      get_string(m, "name", true);
      for (const auto& kv : get_container(m, "set", true, false)->items())
        if (!kv.value().is_number_integer()) wrong_type(kv.key(), "an integer", kv.value());
    }
  } catch (const InputError& e) {
    throw InputError(at + ": " + e.what());
  }
}

// null, or {"class": string, "bits": {module: {bits_activations, bits_weights, bits_bias: an
// integer 1..64 or null}}, the quantizer's hyperparams beside them}.
void check_quantization(const json& q) {
  if (q.is_null()) return;
  if (!q.is_object()) wrong_type("quantization", "an object or null", q);
  const json* cls = find_key(q, "class");
  if (!cls) throw InputError("key 'quantization.class' is missing");
  if (!cls->is_string()) wrong_type("quantization.class", "a string", *cls);
  const json* bits = find_key(q, "bits");
  if (!bits) throw InputError("key 'quantization.bits' is missing");
  if (!bits->is_object()) wrong_type("quantization.bits", "an object", *bits);
  for (const auto& layer : bits->items()) {
    const std::string at = "quantization.bits." + layer.key();
    if (!layer.value().is_object()) wrong_type(at, "an object", layer.value());
    for (const auto& kv : layer.value().items())
      if (kv.key() != "bits_activations" && kv.key() != "bits_weights" && kv.key() != "bits_bias")
        throw InputError("'" + at + "' has an unknown key '" + kv.key() +
                         "' (valid: bits_activations, bits_weights, bits_bias)");
    for (const char* k : {"bits_activations", "bits_weights", "bits_bias"}) {
      const json* v = find_key(layer.value(), k);
      if (!v) throw InputError("key '" + at + "." + k + "' is missing");
      if (v->is_null()) continue;
      if (!v->is_number_integer()) wrong_type(at + "." + k, "an integer or null", *v);
      const bool in_range = v->is_number_unsigned()
                                ? v->get<uint64_t>() >= 1 && v->get<uint64_t>() <= 64
                                : v->get<int64_t>() >= 1 && v->get<int64_t>() <= 64;
      if (!in_range)
        throw InputError("'" + at + "." + k + "' is " + v->dump() +
                         ", which cannot be right (bits are between 1 and 64, null for float)");
    }
  }
}

}  // namespace

std::string library_error_detail(const std::exception& e) {
  std::string msg;
  if (const auto* c = dynamic_cast<const c10::Error*>(&e))
    msg = first_line(c->what_without_backtrace());
  else
    return "";
  // "[enforce fail at inline_container.cc:252] . file in archive ..." -> "file in archive ..."
  if (msg.rfind("[enforce fail at ", 0) == 0) {
    const size_t end = msg.find("] ");
    msg = end == std::string::npos ? "" : msg.substr(end + 2);
    if (msg.rfind(". ", 0) == 0) msg = msg.substr(2);
  }
  // LibTorch's own asks ("please report a bug / an enhancement request to PyTorch") are not ours.
  if (msg.empty() || msg.find("INTERNAL ASSERT") != std::string::npos ||
      msg.find("PyTorch") != std::string::npos)
    return "";
  return " (" + msg + ")";
}

nlohmann::json CheckpointMeta::to_json() const {
  json best = std::isnan(best_metric) ? json(nullptr) : json(best_metric);
  return {{"format", kFormatVersion},
          {"optform", optform},
          {"model", model},
          {"model_options", model_options},
          {"thinning_recipes", thinning_recipes},
          {"config", config},
          {"epoch", epoch},
          {"best_metric_name", best_metric_name},
          {"best_metric", best},
          {"best_epoch", best_epoch},
          {"schedule_text", schedule_text},
          {"extra", extra},
          {"quantization", quantization}};
}

CheckpointMeta CheckpointMeta::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw InputError(std::string("it is ") + j.type_name() + ", not an object");
  CheckpointMeta m;
  m.optform = get_string(j, "optform", true);
  m.model = get_string(j, "model", true);
  m.model_options = *get_container(j, "model_options", true, false);
  if (const json* v = get_container(j, "thinning_recipes", false, true)) m.thinning_recipes = *v;
  for (size_t i = 0; i < m.thinning_recipes.size(); ++i) check_recipe(m.thinning_recipes[i], i);
  if (const json* v = get_container(j, "config", false, false)) m.config = *v;
  m.epoch = get_epoch(j, "epoch", true, kMaxCheckpointEpoch);
  m.best_metric_name = get_string(j, "best_metric_name", false);
  const json* best = find_key(j, "best_metric");
  if (!best) throw InputError("key 'best_metric' is missing");
  if (!best->is_null() && !best->is_number()) wrong_type("best_metric", "a number or null", *best);
  m.best_metric = best->is_null() ? std::numeric_limits<double>::quiet_NaN() : best->get<double>();
  m.best_epoch = get_epoch(j, "best_epoch", false, std::max<int64_t>(m.epoch, -1));
  m.schedule_text = get_string(j, "schedule_text", false);
  if (const json* v = get_container(j, "extra", false, false)) m.extra = *v;
  if (const json* q = find_key(j, "quantization")) {
    check_quantization(*q);
    m.quantization = *q;
  }
  if (const json* bm = find_key(m.extra, "best_metrics")) {
    if (!bm->is_object()) wrong_type("extra.best_metrics", "an object", *bm);
    for (const auto& kv : bm->items())
      if (!kv.value().is_number() && !kv.value().is_null())
        wrong_type("extra.best_metrics." + kv.key(), "a number", kv.value());
  }
  if (const json* nz = find_key(m.extra, "best_nonzero_weights"))
    if (!nz->is_number_integer() || nz->get<int64_t>() < -1)
      wrong_type("extra.best_nonzero_weights", "an integer of at least -1", *nz);
  if (const json* ts = find_key(m.extra, "train_seconds"))
    if (!ts->is_number()) wrong_type("extra.train_seconds", "a number", *ts);
  return m;
}

std::vector<std::pair<std::string, torch::Tensor>> named_state(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model.named_parameters(true)) out.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers(true)) out.emplace_back(b.key(), b.value());
  return out;
}

void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta,
                     const CheckpointParts& parts) {
  torch::serialize::OutputArchive archive;
  archive.write(kMetaKey, c10::IValue(meta.to_json().dump()));
  if (parts.model) {
    // Flat names, stored as a list so dotted names need no escaping in the archive.
    torch::serialize::OutputArchive model_archive;
    std::vector<std::string> names;
    int64_t i = 0;
    for (const auto& kv : named_state(*parts.model)) {
      names.push_back(kv.first);
      model_archive.write("t" + std::to_string(i++), kv.second.detach().cpu());
    }
    model_archive.write("names", c10::IValue(json(names).dump()));
    archive.write("model", model_archive);
  }
  if (parts.optimizer) {
    torch::serialize::OutputArchive opt_archive;
    parts.optimizer->save(opt_archive);
    archive.write("optimizer", opt_archive);
  }
  if (parts.scheduler) {
    torch::serialize::OutputArchive sched_archive;
    parts.scheduler(sched_archive);
    archive.write("scheduler", sched_archive);
  }
  if (parts.task) {
    torch::serialize::OutputArchive task_archive;
    parts.task(task_archive);
    archive.write("task", task_archive);
  }
  archive.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  auto zip = std::make_shared<std::string>();
  archive.save_to([&](const void* data, size_t size) -> size_t {
    zip->append(static_cast<const char*>(data), size);
    return size;
  });
  const std::string bytes = with_checksums(zip);
  write_atomically(path,
                   [&](const std::filesystem::path& tmp) { write_file_bytes(tmp, bytes, path); });
}

Checkpoint Checkpoint::load(const std::filesystem::path& path) {
  const std::string where = "checkpoint " + path.string();
  if (!std::filesystem::exists(path)) throw InputError(where + " does not exist");
  if (std::filesystem::is_directory(path))
    throw InputError(where + " is a directory, not a .ckpt file");
  // A device or pipe (/dev/zero) could be read forever.
  if (!std::filesystem::is_regular_file(path)) throw InputError(where + " is not a regular file");
  auto bytes = read_file_bytes(path);
  Checkpoint c;
  c.path_ = path;
  const ArchiveRecords records = read_records(bytes, where);
  c.verified_ = verify_records(records, where);
  check_tensor_records(records, where);
  c.archive_ = std::make_shared<torch::serialize::InputArchive>();
  try {
    c.archive_->load_from([bytes](uint64_t pos, void* buf,
                                  size_t n) { return BufferReader(bytes).read(pos, buf, n, ""); },
                          [bytes] { return bytes->size(); });
  } catch (const std::exception& e) {
    throw InputError(where + " is corrupt or truncated" + library_error_detail(e));
  }
  c10::IValue meta;
  try {
    if (!c.archive_->try_read(kMetaKey, meta) || !meta.isString()) meta = c10::IValue();
  } catch (const std::exception&) {
    meta = c10::IValue();
  }
  if (!meta.isString()) throw InputError(where + " is not an igb checkpoint (no igb_meta record)");
  const json j = json::parse(meta.toStringRef(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw InputError(where + " has a malformed igb_meta record (it is not valid JSON)");
  // The format decides whether a missing igb_checksums record means "older igb" or "corrupt".
  int64_t format = 1;
  if (const json* f = j.is_object() ? find_key(j, "format") : nullptr) {
    if (!f->is_number_integer())
      throw InputError(where +
                       " has a malformed igb_meta record: 'format' must be an integer, not " +
                       f->type_name());
    if (f->is_number_unsigned() ? f->get<uint64_t>() > kFormatVersion
                                : f->get<int64_t>() > kFormatVersion)
      throw InputError(where + " has format " + f->dump() + ", newer than this build reads (" +
                       std::to_string(kFormatVersion) + ")");
    format = f->get<int64_t>();
    if (format < 1)
      throw InputError(where + " has a malformed igb_meta record: format " + f->dump() +
                       " does not exist");
  }
  if (!c.verified_ && format >= kFirstChecksummedFormat)
    throw InputError(where + " is corrupt: its igb_checksums record is missing (format " +
                     std::to_string(format) + " always has one)");
  try {
    c.meta_ = CheckpointMeta::from_json(j);
  } catch (const InputError& e) {
    throw InputError(where + " has a malformed igb_meta record: " + e.what());
  } catch (const std::exception&) {
    throw InputError(where + " has a malformed igb_meta record");
  }
  if (!c.verified_) warn_unverified(path);
  return c;
}

void Checkpoint::load_model(torch::nn::Module& model) const {
  const std::string where = "checkpoint " + path_.string();
  torch::serialize::InputArchive model_archive;
  std::vector<std::string> names;
  try {
    if (!archive_->try_read("model", model_archive))
      throw InputError(where + " holds no model state");
    c10::IValue names_value;
    if (!model_archive.try_read("names", names_value) || !names_value.isString())
      throw InputError(where + " has a malformed model record (no list of tensor names)");
    const json j = json::parse(names_value.toStringRef(), nullptr, /*allow_exceptions=*/false);
    bool ok = j.is_array();
    for (const auto& n : j) ok = ok && n.is_string();
    if (!ok) throw InputError(where + " has a malformed model record (bad list of tensor names)");
    names = j.get<std::vector<std::string>>();
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(where + " has a malformed model record" + library_error_detail(e));
  }
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < names.size(); ++i) index[names[i]] = static_cast<int64_t>(i);

  std::set<std::string> parameters;
  for (const auto& p : model.named_parameters(true)) parameters.insert(p.key());
  torch::NoGradGuard no_grad;
  auto state = named_state(model);
  for (const auto& kv : state) {
    auto it = index.find(kv.first);
    if (it == index.end())
      throw InputError(where + " has no tensor '" + kv.first + "' that the model needs");
    torch::Tensor saved;
    try {
      if (!model_archive.try_read("t" + std::to_string(it->second), saved) || !saved.defined())
        throw InputError(where + " has a malformed model record (tensor '" + kv.first +
                         "' is missing)");
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw InputError(where + " has a malformed model record (tensor '" + kv.first +
                       "' cannot be read)" + library_error_detail(e));
    }
    if (!saved.sizes().equals(kv.second.sizes()))
      throw InputError(where + ": tensor '" + kv.first + "' has shape " + shape_str(saved) +
                       " but the model expects " + shape_str(kv.second));
    if (saved.is_floating_point()) {
      if (parameters.count(kv.first) && !torch::isfinite(saved).all().item<bool>())
        throw InputError(where + ": parameter '" + kv.first +
                         "' holds non-finite values (NaN or infinity)");
      if (torch::isnan(saved).any().item<bool>())
        throw InputError(where + ": buffer '" + kv.first + "' holds NaN values");
    }
    try {
      kv.second.copy_(saved);
    } catch (const std::exception& e) {
      throw InputError(where + ": tensor '" + kv.first + "' cannot be loaded" +
                       library_error_detail(e));
    }
  }
  if (state.size() != names.size()) {
    for (const auto& n : names) {
      bool found = false;
      for (const auto& kv : state) found = found || kv.first == n;
      if (!found) throw InputError(where + " has tensor '" + n + "' that the model does not");
    }
    throw InputError(where + " names a tensor more than once in its model record");
  }
}

bool Checkpoint::load_optimizer(torch::optim::Optimizer& optimizer) const {
  torch::serialize::InputArchive opt_archive;
  try {
    if (!archive_->try_read("optimizer", opt_archive)) return false;
    optimizer.load(opt_archive);
  } catch (const std::exception& e) {
    throw InputError("checkpoint " + path_.string() + ": optimizer state does not match" +
                     library_error_detail(e));
  }
  return true;
}

bool Checkpoint::scheduler_archive(torch::serialize::InputArchive& out) const {
  try {
    return archive_->try_read("scheduler", out);
  } catch (const std::exception& e) {
    throw InputError("checkpoint " + path_.string() + " has a malformed scheduler record" +
                     library_error_detail(e));
  }
}

bool Checkpoint::task_archive(torch::serialize::InputArchive& out) const {
  try {
    return archive_->try_read("task", out);
  } catch (const std::exception& e) {
    throw InputError("checkpoint " + path_.string() + " has a malformed task record" +
                     library_error_detail(e));
  }
}

void Checkpoint::restore_rng() const {
  torch::Tensor state;
  try {
    if (archive_->try_read("rng_cpu", state)) {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      gen.set_state(state);
    }
  } catch (const std::exception& e) {
    throw InputError("checkpoint " + path_.string() +
                     ": record rng_cpu is not a CPU generator state" + library_error_detail(e));
  }
}

}  // namespace igb
