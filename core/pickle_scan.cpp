#include "core/pickle_scan.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "core/error.h"

namespace igb {

namespace {

/// A value on the machine's stack. Strings and containers are shared (a memoized list appended to
/// later is the same list), so a value costs a pointer however often the memo hands it out.
struct Value {
  enum Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kGlobal,
    kTuple,
    kList,
    kDict,
    kStorage,
    kObject
  };
  Kind kind = kNone;
  int64_t i = 0;
  std::shared_ptr<const std::string> text;
  std::shared_ptr<std::vector<Value>> items;
  const std::string& s() const {
    static const std::string empty;
    return text ? *text : empty;
  }
};

Value make(Value::Kind kind) {
  Value v;
  v.kind = kind;
  if (kind == Value::kTuple || kind == Value::kList || kind == Value::kDict)
    v.items = std::make_shared<std::vector<Value>>();
  return v;
}

class Machine {
 public:
  Machine(const std::string& bytes, const std::string& where) : b_(bytes), where_(where) {}

  PickleScan run() {
    for (;;) {
      const size_t at = pos_;
      const auto op = static_cast<uint8_t>(byte());
      if (op == '.') break;  // STOP
      step(op, at);
    }
    return std::move(scan_);
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at) const {
    throw InputError(where_ + " is corrupt: its pickle " + what + " at byte " + std::to_string(at));
  }

  char byte() {
    if (pos_ >= b_.size()) fail("ends early", pos_);
    return b_[pos_++];
  }
  std::string take(uint64_t n) {
    if (n > b_.size() - pos_) fail("ends early", pos_);
    std::string out = b_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t unsigned_le(int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(byte())) << (8 * k);
    return v;
  }
  std::string line() {
    const size_t end = b_.find('\n', pos_);
    if (end == std::string::npos) fail("ends early", pos_);
    std::string out = b_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

  Value pop(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      fail("pops an empty stack", at);
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  /// The values above the last mark, which is removed.
  std::vector<Value> pop_mark(size_t at) {
    if (marks_.empty()) fail("has no mark to pop to", at);
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Value> out(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(m)),
                           std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return out;
  }
  Value& top(size_t at) {
    if (stack_.empty()) fail("uses an empty stack", at);
    return stack_.back();
  }
  void push_int(int64_t v) {
    Value x = make(Value::kInt);
    x.i = v;
    stack_.push_back(std::move(x));
  }
  void push_text(Value::Kind kind, std::string s) {
    Value x = make(kind);
    x.text = std::make_shared<const std::string>(std::move(s));
    stack_.push_back(std::move(x));
  }
  void push_tuple(std::vector<Value> items) {
    Value t = make(Value::kTuple);
    *t.items = std::move(items);
    stack_.push_back(std::move(t));
  }
  void memo_get(uint64_t key, size_t at) {
    auto it = memo_.find(key);
    if (it == memo_.end()) fail("reads memo entry " + std::to_string(key) + ", never written", at);
    stack_.push_back(it->second);
  }
  int64_t long1(size_t at) {
    const auto n = static_cast<uint8_t>(byte());
    if (n > 8) fail("holds an integer over 64 bits", at);
    uint64_t v = unsigned_le(n);
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign
    return static_cast<int64_t>(v);
  }

  // One opcode; each group says whether it knew it.
  void step(uint8_t op, size_t at);
  bool push_value(uint8_t op, size_t at);
  bool build_container(uint8_t op, size_t at);
  bool use_memo(uint8_t op, size_t at);
  bool call(uint8_t op, size_t at);
  void add_items(std::vector<Value> items, size_t at);
  void persistent_load(size_t at);
  void reduce(size_t at);

  const std::string& b_;
  const std::string& where_;
  size_t pos_ = 0;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, Value> memo_;
  PickleScan scan_;
};

void Machine::step(uint8_t op, size_t at) {
  if (!push_value(op, at) && !build_container(op, at) && !use_memo(op, at) && !call(op, at)) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", op);
    fail(std::string("has opcode ") + hex + ", which LibTorch's checkpoints do not use", at);
  }
}

bool Machine::push_value(uint8_t op, size_t at) {
  switch (op) {
    case 0x80:
      byte();
      return true;  // PROTO
    case 0x95:
      unsigned_le(8);
      return true;  // FRAME
    case '(':
      marks_.push_back(stack_.size());
      return true;  // MARK
    case 'N':
      stack_.push_back(make(Value::kNone));
      return true;
    case 0x88:  // NEWTRUE
    case 0x89:
      stack_.push_back(make(Value::kBool));
      return true;
    case 'J':
      push_int(static_cast<int32_t>(unsigned_le(4)));
      return true;  // BININT
    case 'K':
      push_int(static_cast<int64_t>(unsigned_le(1)));
      return true;  // BININT1
    case 'M':
      push_int(static_cast<int64_t>(unsigned_le(2)));
      return true;  // BININT2
    case 0x8a:
      push_int(long1(at));
      return true;  // LONG1
    case 'G':
      take(8), stack_.push_back(make(Value::kFloat));
      return true;  // BINFLOAT
    case 'X':
    case 'T':
    case 'B':
      push_text(Value::kString, take(unsigned_le(4)));
      return true;
    case 0x8c:
    case 'U':
    case 'C':
      push_text(Value::kString, take(unsigned_le(1)));
      return true;
    case 'c': {  // GLOBAL
      std::string module = line();
      push_text(Value::kGlobal, module + "." + line());
      return true;
    }
    case 0x93: {  // STACK_GLOBAL
      Value name = pop(at), module = pop(at);
      push_text(Value::kGlobal, module.s() + "." + name.s());
      return true;
    }
    default:
      return false;
  }
}

bool Machine::build_container(uint8_t op, size_t at) {
  switch (op) {
    case ')':
      push_tuple({});
      return true;  // EMPTY_TUPLE
    case 't':
      push_tuple(pop_mark(at));
      return true;  // TUPLE
    case 0x85:
    case 0x86:
    case 0x87: {  // TUPLE1..3
      std::vector<Value> items(op - 0x84);
      for (size_t k = items.size(); k-- > 0;) items[k] = pop(at);
      push_tuple(std::move(items));
      return true;
    }
    case ']':
      stack_.push_back(make(Value::kList));
      return true;  // EMPTY_LIST
    case '}':
      stack_.push_back(make(Value::kDict));
      return true;  // EMPTY_DICT
    case 'l':
    case 'd': {  // LIST, DICT
      Value c = make(op == 'l' ? Value::kList : Value::kDict);
      *c.items = pop_mark(at);
      stack_.push_back(std::move(c));
      return true;
    }
    case 'a':
    case 's': {  // APPEND, SETITEM
      std::vector<Value> items(op == 'a' ? 1 : 2);
      for (size_t k = items.size(); k-- > 0;) items[k] = pop(at);
      add_items(std::move(items), at);
      return true;
    }
    case 'e':
    case 'u':
      add_items(pop_mark(at), at);
      return true;  // APPENDS, SETITEMS
    default:
      return false;
  }
}

bool Machine::use_memo(uint8_t op, size_t at) {
  switch (op) {
    case 'q':
      memo_[unsigned_le(1)] = top(at);
      return true;  // BINPUT
    case 'r':
      memo_[unsigned_le(4)] = top(at);
      return true;  // LONG_BINPUT
    case 0x94:
      memo_[memo_.size()] = top(at);
      return true;  // MEMOIZE
    case 'h':
      memo_get(unsigned_le(1), at);
      return true;  // BINGET
    case 'j':
      memo_get(unsigned_le(4), at);
      return true;  // LONG_BINGET
    case '0':
      pop(at);
      return true;  // POP
    case '1':
      pop_mark(at);
      return true;  // POP_MARK
    case '2':
      stack_.push_back(top(at));
      return true;  // DUP
    default:
      return false;
  }
}

bool Machine::call(uint8_t op, size_t at) {
  switch (op) {
    case 'Q':
      persistent_load(at);
      return true;  // BINPERSID
    case 'R':
      reduce(at);
      return true;  // REDUCE
    case 'b':
      pop(at), top(at);
      return true;  // BUILD: the state goes, the object stays
    case 0x81:      // NEWOBJ
      pop(at), pop(at), stack_.push_back(make(Value::kObject));
      return true;
    default:
      return false;
  }
}

void Machine::add_items(std::vector<Value> items, size_t at) {
  if (!top(at).items) fail("adds items to a value that is not a container", at);
  for (auto& v : items) top(at).items->push_back(std::move(v));
}

void Machine::persistent_load(size_t at) {
  Value pid = pop(at);
  const auto* t = pid.kind == Value::kTuple ? pid.items.get() : nullptr;
  if (!t || t->size() != 5 || (*t)[0].kind != Value::kString || (*t)[0].s() != "storage")
    fail("loads a persistent object that is not a storage", at);
  const Value &type = (*t)[1], &key = (*t)[2], &numel = (*t)[4];
  if (type.kind != Value::kGlobal || key.kind != Value::kString || numel.kind != Value::kInt)
    fail("has a malformed storage id", at);
  PickledStorage s;
  s.type = type.s().substr(type.s().rfind('.') + 1);
  s.itemsize = storage_itemsize(s.type);
  if (s.itemsize == 0) fail("loads a storage of unknown type " + type.s(), at);
  s.key = key.s();
  s.numel = numel.i;
  if (s.numel < 0) fail("loads storage " + s.key + " of negative size", at);
  Value v = make(Value::kStorage);
  v.i = static_cast<int64_t>(scan_.storages.size());
  scan_.storages.push_back(std::move(s));
  stack_.push_back(std::move(v));
}

void Machine::reduce(size_t at) {
  Value args = pop(at), callable = pop(at);
  if (callable.kind == Value::kGlobal &&
      (callable.s() == "torch._utils._rebuild_tensor_v2" ||
       callable.s() == "torch._utils._rebuild_tensor") &&
      args.kind == Value::kTuple && args.items->size() >= 4 &&
      (*args.items)[0].kind == Value::kStorage) {
    const auto& a = *args.items;
    PickledTensor t;
    t.storage = static_cast<size_t>(a[0].i);
    if (a[1].kind != Value::kInt || a[2].kind != Value::kTuple || a[3].kind != Value::kTuple)
      fail("rebuilds a tensor with malformed arguments", at);
    t.offset = a[1].i;
    for (const auto* dims : {&a[2], &a[3]})
      for (const auto& d : *dims->items) {
        if (d.kind != Value::kInt) fail("rebuilds a tensor with a size that is not an integer", at);
        (dims == &a[2] ? t.sizes : t.strides).push_back(d.i);
      }
    if (t.sizes.size() != t.strides.size())
      fail("rebuilds a tensor whose sizes and strides differ in number", at);
    scan_.tensors.push_back(std::move(t));
  }
  stack_.push_back(make(Value::kObject));
}

}  // namespace

int64_t storage_itemsize(const std::string& type) {
  static const std::map<std::string, int64_t> sizes = {
      {"DoubleStorage", 8},   {"FloatStorage", 4},          {"HalfStorage", 2},
      {"BFloat16Storage", 2}, {"LongStorage", 8},           {"IntStorage", 4},
      {"ShortStorage", 2},    {"CharStorage", 1},           {"ByteStorage", 1},
      {"BoolStorage", 1},     {"ComplexDoubleStorage", 16}, {"ComplexFloatStorage", 8},
      {"QInt8Storage", 1},    {"QUInt8Storage", 1},         {"QInt32Storage", 4},
      {"QUInt4x2Storage", 1}, {"QUInt2x4Storage", 1}};
  auto it = sizes.find(type);
  return it == sizes.end() ? 0 : it->second;
}

int64_t tensor_extent(const PickledTensor& t) {
  if (t.offset < 0) return -1;
  __int128 last = t.offset;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] < 0 || t.strides[d] < 0) return -1;
    if (t.sizes[d] == 0) return 0;
    last += static_cast<__int128>(t.sizes[d] - 1) * t.strides[d];
    if (last > INT64_MAX - 1) return -1;
  }
  return static_cast<int64_t>(last + 1);
}

PickleScan scan_torch_pickle(const std::string& bytes, const std::string& where) {
  return Machine(bytes, where).run();
}

}  // namespace igb
