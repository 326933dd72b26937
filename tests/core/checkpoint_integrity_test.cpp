// Checkpoints are verified, not trusted: every record carries a CRC-32C, every flipped byte and
// every truncation is either harmless or one InputError line naming the file, impossible values
// are refused, and interrupted writes leave no temporary file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/main_guard.h"
#include "core/table.h"
#include "core/tensorboard.h"
#include "tests/checkpoint_forge.h"
#include "tests/support.h"

namespace igb {

namespace fs = std::filesystem;

namespace {

struct SmallNetImpl : torch::nn::Module {
  SmallNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(3, 4));
    bn = register_module("bn", torch::nn::BatchNorm1d(4));
    fc2 = register_module("fc2", torch::nn::Linear(4, 2));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(bn(fc1(x)))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};
TORCH_MODULE(SmallNet);

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// One step of Adam from the state in `opt`, on a fixed batch; returns fc1's weight after it.
torch::Tensor adam_step(SmallNet& net, torch::optim::Adam& opt) {
  torch::manual_seed(11);
  auto x = torch::randn({4, 3});
  opt.zero_grad();
  net->forward(x).pow(2).sum().backward();
  opt.step();
  return net->fc1->weight.detach().clone();
}

CheckpointMeta small_meta() {
  CheckpointMeta meta;
  meta.optform = "sr";
  meta.model = "net";
  meta.model_options = {{"hidden", 4}};
  meta.epoch = 3;
  meta.best_epoch = 2;
  meta.best_metric = 30.25;
  meta.best_metric_name = "psnr";
  meta.schedule_text = "version: 1\n";
  meta.extra = {{"train_seconds", 1.5}, {"best_metrics", {{"psnr", 30.25}}}};
  return meta;
}

// The message of an InputError a load must have thrown: one line that names the file.
void expect_one_line_naming(const std::string& what, const fs::path& file,
                            const std::string& context) {
  EXPECT_FALSE(what.empty()) << context;
  EXPECT_EQ(what.find('\n'), std::string::npos) << context << ": " << what;
  EXPECT_NE(what.find(file.string()), std::string::npos) << context << ": " << what;
}

class CheckpointIntegrityTest : public ::testing::Test {
 protected:
  // A trained-a-little net with Adam state and a scheduler section, saved to dir_/ref.ckpt.
  void SetUp() override {
    torch::manual_seed(3);
    for (int i = 0; i < 2; ++i) adam_step(net_, opt_);
    mask_ = (torch::arange(12).reshape({4, 3}) % 2).to(torch::kFloat);
    save(dir_ / "ref.ckpt", small_meta(), net_);
  }

  void save(const fs::path& path, const CheckpointMeta& meta, SmallNet& net) {
    CheckpointParts parts;
    parts.model = net.get();
    parts.optimizer = &opt_;
    parts.scheduler = [this](torch::serialize::OutputArchive& a) { a.write("mask", mask_); };
    save_checkpoint(path, meta, parts);
  }

  // Loads `path` completely (meta, model, optimizer, scheduler, RNG) and checks that it is the
  // reference exactly. Throws what the load throws.
  void load_and_compare(const fs::path& path, const std::string& context) {
    auto ck = Checkpoint::load(path);
    EXPECT_TRUE(ck.verified()) << context;
    EXPECT_EQ(ck.meta().to_json(), small_meta().to_json()) << context;
    torch::manual_seed(99);
    SmallNet b;
    torch::optim::Adam opt_b(b->parameters(), torch::optim::AdamOptions(0.01));
    ck.load_model(*b);
    for (const auto& [name, t] : named_state(*net_))
      for (const auto& [n2, t2] : named_state(*b))
        if (n2 == name) {
          EXPECT_TRUE(torch::equal(t, t2)) << context << ": " << name;
        }
    ASSERT_TRUE(ck.load_optimizer(opt_b)) << context;
    torch::serialize::InputArchive sched;
    ASSERT_TRUE(ck.scheduler_archive(sched)) << context;
    torch::Tensor mask;
    sched.read("mask", mask);
    EXPECT_TRUE(torch::equal(mask, mask_)) << context;
    ck.restore_rng();
    // The optimizer state is the same when the next step is: compare with a clean load.
    auto clean = Checkpoint::load(dir_ / "ref.ckpt");
    SmallNet c;
    torch::optim::Adam opt_c(c->parameters(), torch::optim::AdamOptions(0.01));
    clean.load_model(*c);
    clean.load_optimizer(opt_c);
    EXPECT_TRUE(torch::equal(adam_step(b, opt_b), adam_step(c, opt_c))) << context;
  }

  test::TempDir tmp_;
  fs::path dir_ = tmp_.path();
  SmallNet net_;
  torch::optim::Adam opt_{net_->parameters(), torch::optim::AdamOptions(0.01)};
  torch::Tensor mask_;
};

}  // namespace

TEST_F(CheckpointIntegrityTest, CleanFileRoundTripsAndIsVerified) {
  load_and_compare(dir_ / "ref.ckpt", "clean");
}

// Flip one bit at every 97th byte and at the first and last 64 bytes: each load either gives the
// reference back exactly or throws one InputError line naming the file; nothing else.
TEST_F(CheckpointIntegrityTest, EveryFlippedByteIsHarmlessOrOneInputErrorLine) {
  const std::string ref = read_bytes(dir_ / "ref.ckpt");
  ASSERT_GT(ref.size(), 1000u);
  std::vector<size_t> offsets;
  for (size_t i = 0; i < ref.size(); i += 97) offsets.push_back(i);
  for (size_t i = 0; i < 64; ++i) {
    offsets.push_back(i);
    offsets.push_back(ref.size() - 1 - i);
  }
  const fs::path bad = dir_ / "flipped.ckpt";
  int refused = 0, identical = 0, checksum_failures = 0;
  for (size_t off : offsets) {
    std::string bytes = ref;
    bytes[off] = static_cast<char>(bytes[off] ^ (1 << (off % 8)));
    write_bytes(bad, bytes);
    const std::string context = "flip at offset " + std::to_string(off);
    try {
      load_and_compare(bad, context);
      ++identical;
    } catch (const InputError& e) {
      ++refused;
      expect_one_line_naming(e.what(), bad, context);
      checksum_failures += std::string(e.what()).find("fails its checksum") != std::string::npos;
    } catch (const std::exception& e) {
      ADD_FAILURE() << context << ": not an InputError: " << e.what();
    }
  }
  EXPECT_EQ(refused + identical, static_cast<int>(offsets.size()));
  // Most of the file is record data (tensors, pickles): most flips must be caught by a checksum.
  EXPECT_GT(checksum_failures, static_cast<int>(offsets.size()) / 3);
}

TEST_F(CheckpointIntegrityTest, AFlippedWeightNamesTheRecordThatFailsItsChecksum) {
  // fc1.weight holds a pattern that is easy to find in the file.
  SmallNet n;
  {
    torch::NoGradGuard no_grad;
    n->fc1->weight.copy_(torch::full({4, 3}, 1.0f / 3.0f) + torch::arange(12).reshape({4, 3}));
  }
  save(dir_ / "w.ckpt", small_meta(), n);
  std::string bytes = read_bytes(dir_ / "w.ckpt");
  const float first = n->fc1->weight[0][0].item<float>();
  const float second = n->fc1->weight[0][1].item<float>();
  std::string pattern(8, '\0');
  std::memcpy(pattern.data(), &first, 4);
  std::memcpy(pattern.data() + 4, &second, 4);
  const size_t at = bytes.find(pattern);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] = static_cast<char>(bytes[at + 3] ^ 0x40);  // an exponent bit: 1e38-like weights
  write_bytes(dir_ / "w.ckpt", bytes);
  try {
    Checkpoint::load(dir_ / "w.ckpt");
    FAIL() << "a flipped weight was loaded";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(
        what.rfind("checkpoint " + (dir_ / "w.ckpt").string() + " is corrupt: record data/", 0), 0u)
        << what;
    EXPECT_NE(what.find(" fails its checksum"), std::string::npos) << what;
  }
}

TEST_F(CheckpointIntegrityTest, TruncatedFilesAreOneInputErrorLine) {
  const std::string ref = read_bytes(dir_ / "ref.ckpt");
  const fs::path bad = dir_ / "truncated.ckpt";
  for (size_t len : {size_t{0}, size_t{1}, size_t{4}, size_t{30}, ref.size() / 4, ref.size() / 2,
                     ref.size() - 100, ref.size() - 22, ref.size() - 1}) {
    write_bytes(bad, ref.substr(0, len));
    const std::string context = "truncated to " + std::to_string(len) + " bytes";
    try {
      Checkpoint::load(bad);
      ADD_FAILURE() << context << ": loaded";
    } catch (const InputError& e) {
      expect_one_line_naming(e.what(), bad, context);
    } catch (const std::exception& e) {
      ADD_FAILURE() << context << ": not an InputError: " << e.what();
    }
  }
}

TEST_F(CheckpointIntegrityTest, DevicesAreRefusedBeforeReading) {
  try {
    Checkpoint::load("/dev/zero");
    FAIL() << "/dev/zero was loaded";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint /dev/zero is not a regular file");
  }
}

TEST_F(CheckpointIntegrityTest, NonFiniteWeightsAreRefusedNamingTheParameter) {
  for (float bad_value :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    SmallNet n;
    {
      torch::NoGradGuard no_grad;
      n->fc2->weight[1][2] = bad_value;
    }
    save(dir_ / "nan.ckpt", small_meta(), n);
    auto ck = Checkpoint::load(dir_ / "nan.ckpt");  // the archive itself is intact
    SmallNet target;
    try {
      ck.load_model(*target);
      FAIL() << "a non-finite weight was loaded";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), "checkpoint " + (dir_ / "nan.ckpt").string() +
                                           ": parameter 'fc2.weight' holds non-finite values "
                                           "(NaN or infinity)");
    }
  }
  // A NaN buffer too.
  SmallNet n;
  {
    torch::NoGradGuard no_grad;
    n->bn->running_var[0] = std::nanf("");
  }
  save(dir_ / "nanbuf.ckpt", small_meta(), n);
  SmallNet target;
  try {
    Checkpoint::load(dir_ / "nanbuf.ckpt").load_model(*target);
    FAIL() << "a NaN buffer was loaded";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("buffer 'bn.running_var' holds NaN values"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointIntegrityTest, ImpossibleEpochsAreRefused) {
  const fs::path p = dir_ / "epoch.ckpt";
  auto expect_refused = [&](const CheckpointMeta& meta, const std::string& message) {
    save(p, meta, net_);
    try {
      Checkpoint::load(p);
      ADD_FAILURE() << "loaded: " << message;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                "checkpoint " + p.string() + " has a malformed igb_meta record: " + message);
    }
  };
  CheckpointMeta meta = small_meta();
  meta.epoch = -5;
  meta.best_epoch = -1;
  expect_refused(meta, "'epoch' is -5, which cannot be right (it must be between -1 and 1000000)");
  meta.epoch = int64_t{1} << 40;
  expect_refused(meta,
                 "'epoch' is 1099511627776, which cannot be right (it must be between -1 and "
                 "1000000)");
  meta.epoch = 3;
  meta.best_epoch = 4;
  expect_refused(meta, "'best_epoch' is 4, which cannot be right (it must be between -1 and 3)");
  meta.best_epoch = 3;
  save(p, meta, net_);
  EXPECT_EQ(Checkpoint::load(p).meta().best_epoch, 3);
}

TEST_F(CheckpointIntegrityTest, MetaOfTheWrongTypeIsRefusedNamingTheKey) {
  const fs::path p = dir_ / "types.ckpt";
  auto expect_refused = [&](const CheckpointMeta& meta, const std::string& message) {
    save(p, meta, net_);
    try {
      Checkpoint::load(p);
      ADD_FAILURE() << "loaded: " << message;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                "checkpoint " + p.string() + " has a malformed igb_meta record: " + message);
    }
  };
  CheckpointMeta meta = small_meta();
  meta.thinning_recipes = "filters";
  expect_refused(meta, "'thinning_recipes' must be a list, not string");
  meta.thinning_recipes = nlohmann::json::array({nlohmann::json::array()});
  expect_refused(meta, "thinning recipe 1 must be an object, not array");
  meta.thinning_recipes = nlohmann::json::parse(
      R"([{"kind": "filters", "tensors": [{"name": "fc1.weight", "dim": 0, "size": 4,
           "keep": [0, "1"]}], "modules": []}])");
  expect_refused(meta, "thinning recipe 1: 'keep' must be a list of integers, not string");
  meta.thinning_recipes = nlohmann::json::parse(R"([{"kind": "filters", "tensors": []}])");
  expect_refused(meta, "thinning recipe 1: key 'modules' is missing");
  meta = small_meta();
  meta.model_options = nlohmann::json::array({1, 2});
  expect_refused(meta, "'model_options' must be an object, not array");
  meta = small_meta();
  meta.extra = {{"train_seconds", "long"}};
  expect_refused(meta, "'extra.train_seconds' must be a number, not string");
}

// Checkpoints written before checksums existed (format 1, no igb_checksums) still load, with a
// warning that they are unverified; malformed ones are one InputError line.
TEST_F(CheckpointIntegrityTest, OlderCheckpointsLoadUnverifiedAndMalformedOnesAreRefused) {
  auto write_legacy = [&](const fs::path& path, const nlohmann::json& meta, bool with_model) {
    torch::serialize::OutputArchive archive;
    archive.write("igb_meta", c10::IValue(meta.dump()));
    if (with_model) {
      torch::serialize::OutputArchive model_archive;
      std::vector<std::string> names;
      int64_t i = 0;
      for (const auto& kv : named_state(*net_)) {
        names.push_back(kv.first);
        model_archive.write("t" + std::to_string(i++), kv.second.detach());
      }
      model_archive.write("names", c10::IValue(nlohmann::json(names).dump()));
      archive.write("model", model_archive);
    }
    archive.save_to(path.string());
  };
  nlohmann::json meta = small_meta().to_json();
  meta["format"] = 1;
  write_legacy(dir_ / "old.ckpt", meta, true);
  testing::internal::CaptureStderr();
  auto ck = Checkpoint::load(dir_ / "old.ckpt");
  Checkpoint::load(dir_ / "old.ckpt");  // warned once per file
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "warning: checkpoint " + (dir_ / "old.ckpt").string() +
                     " has no checksums (written by an older igb); it is loaded unverified\n");
  EXPECT_FALSE(ck.verified());
  EXPECT_EQ(ck.meta().epoch, 3);
  SmallNet b;
  ck.load_model(*b);
  EXPECT_TRUE(torch::equal(b->fc1->weight, net_->fc1->weight));

  auto expect_refused = [&](const nlohmann::json& m, const std::string& message) {
    const fs::path p = dir_ / "old_bad.ckpt";
    write_legacy(p, m, true);
    testing::internal::CaptureStderr();
    try {
      Checkpoint::load(p);
      ADD_FAILURE() << "loaded: " << message;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), "checkpoint " + p.string() + message);
    }
    testing::internal::GetCapturedStderr();
  };
  auto without = [&](const char* key) {
    auto m = meta;
    m.erase(key);
    return m;
  };
  expect_refused(without("optform"), " has a malformed igb_meta record: key 'optform' is missing");
  expect_refused(without("epoch"), " has a malformed igb_meta record: key 'epoch' is missing");
  auto m = meta;
  m["epoch"] = "3";
  expect_refused(m, " has a malformed igb_meta record: 'epoch' must be an integer, not string");
  m = meta;
  m["format"] = 2;
  expect_refused(m, " is corrupt: its igb_checksums record is missing (format 2 always has one)");
  m = meta;
  m["format"] = 7;
  expect_refused(m, " has format 7, newer than this build reads (2)");
  expect_refused(nlohmann::json::array({1, 2}),
                 " has a malformed igb_meta record: it is array, not an object");

  // Not JSON at all, and a model record without its list of names.
  torch::serialize::OutputArchive garbage;
  garbage.write("igb_meta", c10::IValue(std::string("{\"optform\": ")));
  garbage.save_to((dir_ / "garbage.ckpt").string());
  try {
    Checkpoint::load(dir_ / "garbage.ckpt");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint " + (dir_ / "garbage.ckpt").string() +
                                         " has a malformed igb_meta record (it is not valid JSON)");
  }
  torch::serialize::OutputArchive nameless;
  nameless.write("igb_meta", c10::IValue(meta.dump()));
  torch::serialize::OutputArchive model_archive;
  model_archive.write("names", c10::IValue(std::string("[1, 2]")));
  nameless.write("model", model_archive);
  nameless.save_to((dir_ / "nameless.ckpt").string());
  testing::internal::CaptureStderr();
  auto nl = Checkpoint::load(dir_ / "nameless.ckpt");
  testing::internal::GetCapturedStderr();
  try {
    nl.load_model(*b);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint " + (dir_ / "nameless.ckpt").string() +
                  " has a malformed model record (bad list of tensor names)");
  }
}

TEST_F(CheckpointIntegrityTest, AFailedWriteLeavesNoTemporaryFile) {
  const fs::path p = dir_ / "fail.ckpt";
  int pending_during_write = -1;
  EXPECT_THROW(write_atomically(p,
                                [&](const fs::path& tmp) {
                                  std::ofstream(tmp) << "partial";
                                  pending_during_write = pending_temporary_count();
                                  throw InputError("disk full");
                                }),
               InputError);
  EXPECT_EQ(pending_during_write, 1);
  EXPECT_EQ(pending_temporary_count(), 0);
  EXPECT_FALSE(fs::exists(p));
  // Only the reference checkpoint is left in the folder.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir_)) files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"ref.ckpt"});
  // A successful write unregisters its temporary file too.
  write_text_atomically(dir_ / "ok.txt", "ok");
  EXPECT_EQ(pending_temporary_count(), 0);
  EXPECT_EQ(read_text_file(dir_ / "ok.txt"), "ok");
}

// A checksum catches accidents, not forgery. Forged files below carry correct checksums for what
// they hold; every one is one InputError line naming the file and what is wrong, before LibTorch
// reads a byte of a tensor.
class ForgedCheckpointTest : public CheckpointIntegrityTest {
 protected:
  // A checkpoint of a 64x64 linear layer (a 16 KiB weight record) with SGD state, and the name of
  // the weight's data record.
  void SetUp() override {
    CheckpointIntegrityTest::SetUp();
    torch::manual_seed(5);
    torch::nn::Linear big(64, 64);
    CheckpointParts parts;
    parts.model = big.get();
    save_checkpoint(dir_ / "big.ckpt", small_meta(), parts);
    for (const auto& name : test::checkpoint_records(dir_ / "big.ckpt"))
      if (name.rfind("data/", 0) == 0 && record_size(name) == 64 * 64 * 4) weight_record_ = name;
    ASSERT_FALSE(weight_record_.empty());
  }

  size_t record_size(const std::string& name) {
    caffe2::serialize::PyTorchStreamReader reader((dir_ / "big.ckpt").string());
    return std::get<1>(reader.getRecord(name));
  }

  // The message of loading `path` and its model, which must fail with one InputError line.
  std::string load_error(const fs::path& path) {
    try {
      auto ck = Checkpoint::load(path);
      torch::nn::Linear big(64, 64);
      ck.load_model(*big);
    } catch (const InputError& e) {
      expect_one_line_naming(e.what(), path, path.string());
      return e.what();
    }
    ADD_FAILURE() << path << " loaded";
    return "";
  }

  std::string weight_record_;
};

TEST_F(ForgedCheckpointTest, ARecordShorterThanItsTensorIsNamedNotRead) {
  for (size_t keep : {0u, 4u, 100u}) {
    const fs::path forged = dir_ / ("short" + std::to_string(keep) + ".ckpt");
    test::forge_checkpoint(dir_ / "big.ckpt", forged,
                           [&](const std::string& name, std::string& bytes, bool&) {
                             if (name == weight_record_) bytes.resize(keep);
                           });
    const auto what = load_error(forged);
    EXPECT_NE(what.find("record " + weight_record_ + " holds " + std::to_string(keep) +
                        " bytes, but its tensor's storage needs 4096 elements of 4 bytes"),
              std::string::npos)
        << what;
  }
  // The same checkpoint re-signed without damage loads as it was.
  test::forge_checkpoint(dir_ / "big.ckpt", dir_ / "same.ckpt",
                         [](const std::string&, std::string&, bool&) {});
  auto ck = Checkpoint::load(dir_ / "same.ckpt");
  torch::nn::Linear a(64, 64), b(64, 64);
  Checkpoint::load(dir_ / "big.ckpt").load_model(*a);
  ck.load_model(*b);
  EXPECT_TRUE(torch::equal(a->weight, b->weight));
}

TEST_F(ForgedCheckpointTest, AMissingDataRecordOrVersionIsNamed) {
  test::forge_checkpoint(
      dir_ / "big.ckpt", dir_ / "nodata.ckpt",
      [&](const std::string& name, std::string&, bool& keep) { keep = name != weight_record_; });
  EXPECT_NE(load_error(dir_ / "nodata.ckpt")
                .find("record " + weight_record_ + " (a tensor's data) is missing"),
            std::string::npos);
  // The archive's own 'version' record renamed in its zip directory (LibTorch's reader refuses
  // such a file asking for "an enhancement request to PyTorch").
  std::string bytes = read_bytes(dir_ / "big.ckpt");
  int renamed = 0;
  for (size_t at = bytes.find("/version"); at != std::string::npos;
       at = bytes.find("/version", at + 1), ++renamed)
    bytes[at + 7] = 'X';
  ASSERT_GE(renamed, 2);  // its local header and its central directory entry
  write_bytes(dir_ / "noversion.ckpt", bytes);
  const auto what = load_error(dir_ / "noversion.ckpt");
  EXPECT_NE(what.find("its archive has no 'version' record"), std::string::npos) << what;
  EXPECT_EQ(what.find("PyTorch"), std::string::npos) << what;
}

TEST_F(ForgedCheckpointTest, TorchScriptCodeInACheckpointIsRefusedUnrun) {
  bool forged = false;
  test::forge_checkpoint(dir_ / "big.ckpt", dir_ / "code.ckpt",
                         [&](const std::string& name, std::string& bytes, bool&) {
                           if (name.rfind("code/", 0) == 0 && name.size() > 3 &&
                               name.compare(name.size() - 3, 3, ".py") == 0 && !forged) {
                             bytes += "\n  def __setstate__(self, state: str) -> None:\n    pass\n";
                             forged = true;
                           }
                         });
  ASSERT_TRUE(forged);
  const auto what = load_error(dir_ / "code.ckpt");
  EXPECT_NE(what.find("holds TorchScript code, which igb never writes and will not run"),
            std::string::npos)
      << what;
}

TEST_F(ForgedCheckpointTest, AForgedPickleIsNamedWithItsByte) {
  test::forge_checkpoint(dir_ / "big.ckpt", dir_ / "pickle.ckpt",
                         [](const std::string& name, std::string& bytes, bool&) {
                           if (name == "data.pkl") bytes.resize(bytes.size() / 2);
                         });
  const auto what = load_error(dir_ / "pickle.ckpt");
  EXPECT_NE(what.find("record data.pkl is corrupt: its pickle ends early at byte"),
            std::string::npos)
      << what;
}

// SIGTERM in the middle of a write: the handler guarded_main installs removes the temporary file
// and the process still dies of SIGTERM. The write runs in a death test's child, which re-runs
// this test from the start (threadsafe style), so the folder reaches it through the environment.
TEST_F(CheckpointIntegrityTest, SigtermDuringAWriteLeavesNoTemporaryFile) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* kVar = "IGB_TEST_SIGTERM_DIR";
  ::setenv(kVar, dir_.c_str(), /*overwrite=*/0);  // the parent's folder wins in the child
  const fs::path p = fs::path(::getenv(kVar)) / "sig.ckpt";
  EXPECT_EXIT(
      {
        install_interrupt_cleanup();
        write_atomically(p, [](const fs::path& tmp) {
          std::ofstream(tmp) << "partial";
          ::raise(SIGTERM);
        });
      },
      ::testing::KilledBySignal(SIGTERM), "");
  ::unsetenv(kVar);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir_)) files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"ref.ckpt"});
}

}  // namespace igb

namespace igb {

namespace {

/// A file-size limit of `bytes` for this process while it lives, with SIGXFSZ ignored (as the
/// drivers' guarded_main does), so a write past it fails with EFBIG ("File too large") as a full
/// disk fails with ENOSPC.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit r = old_;
    r.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

/// The InputError message of `f`, which must throw one.
std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

// A damaged zip directory (a record's name no longer under the archive's folder) is named in our
// words, not the zip library's.
TEST_F(CheckpointIntegrityTest, ADamagedZipDirectoryIsNamedInOneLine) {
  std::string bytes = read_text_file(dir_ / "ref.ckpt");
  const std::string entry("PK\x01\x02", 4);
  const size_t second = bytes.find(entry, bytes.find(entry) + 4);
  ASSERT_NE(second, std::string::npos);
  bytes[second + 46] = 'b';  // "archive/…" becomes "brchive/…" in the directory only
  const fs::path damaged = dir_ / "damaged.ckpt";
  write_text_atomically(damaged, bytes);
  const std::string e = input_error([&] { Checkpoint::load(damaged); });
  expect_one_line_naming(e, damaged, "damaged directory");
  EXPECT_NE(e.find("its zip directory is damaged (record 'brchive/"), std::string::npos) << e;
  EXPECT_EQ(e.find("subdirectory"), std::string::npos) << e;
}

// A write the system refuses part way (a full disk, a file-size limit) is one line naming the
// file the user knows and the system's reason; the earlier file keeps every byte, no temporary
// is left, and an appended log, CSV or event file is cut back to its last whole record.
TEST_F(CheckpointIntegrityTest, AWriteTheSystemRefusesIsOneLineWithItsReasonAndKeepsTheOldFile) {
  const fs::path ckpt = dir_ / "ref.ckpt", text = dir_ / "notes.txt", csv = dir_ / "m.csv";
  write_text_atomically(text, "old\n");
  CsvAppender rows(csv.string(), {"epoch", "loss"});
  rows.append({{"epoch", "0"}, {"loss", "1.5"}});
  EventWriter events(dir_ / "tb");
  const auto ckpt_before = read_text_file(ckpt), csv_before = read_text_file(csv),
             events_before = read_text_file(events.path());
  {
    FileSizeLimit limit(fs::file_size(ckpt) / 2);
    std::string e = input_error([&] { save(ckpt, small_meta(), net_); });
    EXPECT_EQ(e, "cannot write " + ckpt.string() + ": File too large");
    e = input_error([&] { write_text_atomically(text, std::string(fs::file_size(ckpt), 'x')); });
    EXPECT_EQ(e, "cannot write " + text.string() + ": File too large");
    e = input_error([&] {
      rows.append({{"epoch", "1"}, {"loss", std::string(fs::file_size(ckpt), '9')}});
    });
    EXPECT_EQ(e, "cannot write " + csv.string() + ": File too large");
    for (int i = 0; i < 2000; ++i) events.add_scalar("val/loss", i, i);
    e = input_error([&] { events.flush(); });
    EXPECT_EQ(e, "cannot write " + events.path().string() + ": File too large");
  }
  EXPECT_EQ(read_text_file(ckpt), ckpt_before);
  load_and_compare(ckpt, "after the refused write");
  EXPECT_EQ(read_text_file(text), "old\n");
  EXPECT_EQ(read_text_file(csv), csv_before);
  EXPECT_EQ(read_text_file(events.path()), events_before);
  EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"m.csv", "notes.txt", "ref.ckpt", "tb"}));
  EXPECT_EQ(pending_temporary_count(), 0);
}

}  // namespace igb
