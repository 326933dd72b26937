// The pickle scanner reads LibTorch's pickles without building objects: the storages they load
// and the tensors they view, checked against the records before LibTorch trusts them.
#include "core/pickle_scan.h"

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "core/checkpoint.h"
#include "core/error.h"
#include "tests/support.h"

namespace igb {

namespace {

using namespace std::string_literals;

std::string text(const std::string& s) {  // BINUNICODE
  std::string out = "X";
  for (int k = 0; k < 4; ++k) out += static_cast<char>((s.size() >> (8 * k)) & 0xff);
  return out + s;
}
std::string int1(int v) { return std::string("K") + static_cast<char>(v); }

// _rebuild_tensor_v2(('storage', FloatStorage, '0', 'cpu', numel) persistent, offset, sizes,
// strides, False, OrderedDict()): what torch's pickler writes for a tensor, with the global and
// the key memoized and read back once, as it does.
std::string tensor_pickle(int numel, int offset, int s0, int s1, int st0, int st1) {
  std::string p = "\x80\x02"s;
  p += "ctorch._utils\n_rebuild_tensor_v2\nq\x00"s;
  p += "(("s + text("storage") + "ctorch\nFloatStorage\nq\x01"s + text("0") + "q\x02"s +
       text("cpu") + int1(numel) + "tQ"s;
  p += int1(offset) + int1(s0) + int1(s1) + "\x86"s + int1(st0) + int1(st1) + "\x86"s;
  p += "\x89"s + "ccollections\nOrderedDict\n)Rtq\x03R"s;
  // The same tensor again through the memo: the same storage key.
  p += "h\x00(("s + text("storage") + "h\x01h\x02"s + text("cpu") + int1(numel) + "tQ"s + int1(0) +
       int1(numel) + "\x85"s + int1(1) + "\x85\x89h\x03"s + "tR"s;
  return p + "\x86."s;
}

}  // namespace

TEST(PickleScan, FindsTheStoragesAndTensorViewsOfATorchPickle) {
  const auto scan = scan_torch_pickle(tensor_pickle(6, 1, 2, 2, 2, 1), "test");
  ASSERT_EQ(scan.storages.size(), 2u);
  EXPECT_EQ(scan.storages[0].key, "0");
  EXPECT_EQ(scan.storages[0].type, "FloatStorage");
  EXPECT_EQ(scan.storages[0].itemsize, 4);
  EXPECT_EQ(scan.storages[0].numel, 6);
  ASSERT_EQ(scan.tensors.size(), 2u);
  EXPECT_EQ(scan.tensors[0].offset, 1);
  EXPECT_EQ(scan.tensors[0].sizes, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(scan.tensors[0].strides, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(tensor_extent(scan.tensors[0]), 5);  // 1 + 1*2 + 1*1 + 1
  EXPECT_EQ(tensor_extent(scan.tensors[1]), 6);
  EXPECT_EQ(scan.tensors[1].storage, 1u);
}

TEST(PickleScan, ExtentsRefuseNegativeAndOverflowingViews) {
  PickledTensor t;
  t.sizes = {3, 4};
  t.strides = {4, 1};
  EXPECT_EQ(tensor_extent(t), 12);
  t.sizes = {0, 4};
  EXPECT_EQ(tensor_extent(t), 0);
  t.sizes = {3, 4};
  t.strides = {-4, 1};
  EXPECT_EQ(tensor_extent(t), -1);
  t.strides = {4, 1};
  t.offset = -1;
  EXPECT_EQ(tensor_extent(t), -1);
  t.offset = 0;
  t.sizes = {int64_t{1} << 40, int64_t{1} << 40};
  t.strides = {int64_t{1} << 40, 1};
  EXPECT_EQ(tensor_extent(t), -1);
  EXPECT_EQ(storage_itemsize("DoubleStorage"), 8);
  EXPECT_EQ(storage_itemsize("Python"), 0);
}

TEST(PickleScan, DamagedPicklesAreOneLineNamingTheByte) {
  const std::string good = tensor_pickle(6, 1, 2, 2, 2, 1);
  auto error = [](const std::string& bytes) -> std::string {
    try {
      scan_torch_pickle(bytes, "record data.pkl");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  // Cut inside the second line of its first GLOBAL (bytes 16 to 34): that line is where it ends.
  EXPECT_EQ(error(good.substr(0, 20)),
            "record data.pkl is corrupt: its pickle ends early at byte 16");
  for (size_t cut = 1; cut < good.size(); ++cut)
    EXPECT_NE(error(good.substr(0, cut)).find("record data.pkl is corrupt: its pickle "),
              std::string::npos)
        << cut;
  EXPECT_EQ(error("\x80\x02\xfe."s),
            "record data.pkl is corrupt: its pickle has opcode 0xfe, which LibTorch's checkpoints "
            "do not use at byte 2");
  EXPECT_EQ(error("\x80\x02h\x07."s),
            "record data.pkl is corrupt: its pickle reads memo entry 7, never written at byte 2");
  EXPECT_EQ(error("\x80\x02"s + "0."s),
            "record data.pkl is corrupt: its pickle pops an empty stack at byte 2");
  // A persistent id that is not a storage, a storage of negative size.
  EXPECT_NE(
      error("\x80\x02"s + text("x") + "Q."s).find("a persistent object that is not a storage"),
      std::string::npos);
  std::string negative = "\x80\x02("s + text("storage") + "ctorch\nFloatStorage\n"s + text("0") +
                         text("cpu") + "J\xff\xff\xff\xff"s + "tQ."s;
  EXPECT_NE(error(negative).find("storage 0 of negative size"), std::string::npos);
}

// The pickles of a real checkpoint: one storage per tensor record, found by the scanner, each as
// large as its record.
TEST(PickleScan, ReadsEveryStorageOfARealCheckpoint) {
  test::TempDir tmp;
  torch::manual_seed(1);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 8, 3));
  CheckpointMeta meta;
  meta.optform = "sr";
  meta.model = "net";
  CheckpointParts parts;
  parts.model = conv.get();
  save_checkpoint(tmp / "c.ckpt", meta, parts);
  caffe2::serialize::PyTorchStreamReader reader((tmp / "c.ckpt").string());
  int64_t data_records = 0;
  for (const auto& name : reader.getAllRecords()) data_records += name.rfind("data/", 0) == 0;
  auto pkl = reader.getRecord("data.pkl");
  const std::string bytes(static_cast<const char*>(std::get<0>(pkl).get()), std::get<1>(pkl));
  const auto scan = scan_torch_pickle(bytes, "data.pkl");
  EXPECT_EQ(static_cast<int64_t>(scan.storages.size()), data_records);
  for (const auto& st : scan.storages) {
    const auto rec = reader.getRecord("data/" + st.key);
    EXPECT_EQ(st.numel * st.itemsize, static_cast<int64_t>(std::get<1>(rec))) << st.key;
  }
  EXPECT_GE(scan.tensors.size(), 2u);  // weight and bias
}

}  // namespace igb
