// Restricted unpickler: see pickle_reader.h. Nothing here imports or calls Python code; the
// opcodes are interpreted into inert values, and unknown globals into Kind::Refused markers.
#include "core/pickle_reader.h"

#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>

namespace attnscope::pickle {
namespace {

// The globals a torch.save'd state_dict legitimately needs, besides the storage classes.
constexpr const char* kOrderedDict = "collections.OrderedDict";
constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr const char* kRebuildParameter = "torch._utils._rebuild_parameter";
constexpr const char* kRebuildParameterWithState = "torch._utils._rebuild_parameter_with_state";

// Larger views than their storage (expanded buffers) are rare and small in real checkpoints.
constexpr int64_t kMaxRepeatedViewNumel = int64_t{1} << 28;

bool is_allowed_global(const std::string& name) {
  return name == kOrderedDict || name == kRebuildTensor || name == kRebuildParameter ||
         name == kRebuildParameterWithState || storage_dtype(name) != c10::ScalarType::Undefined;
}

bool is_placeholder(const Value* v) { return v->kind == Kind::Refused || v->kind == Kind::Invalid; }

// acc += a * b; false when the result does not fit in int64.
bool add_mul_checked(int64_t& acc, int64_t a, int64_t b) {
  int64_t product = 0;
  return !__builtin_mul_overflow(a, b, &product) && !__builtin_add_overflow(acc, product, &acc);
}

}  // namespace

c10::ScalarType storage_dtype(const std::string& global_name) {
  static const std::map<std::string, c10::ScalarType> table = {
      {"torch.FloatStorage", c10::ScalarType::Float},       {"torch.HalfStorage", c10::ScalarType::Half},
      {"torch.BFloat16Storage", c10::ScalarType::BFloat16}, {"torch.DoubleStorage", c10::ScalarType::Double},
      {"torch.LongStorage", c10::ScalarType::Long},         {"torch.IntStorage", c10::ScalarType::Int},
      {"torch.ShortStorage", c10::ScalarType::Short},       {"torch.CharStorage", c10::ScalarType::Char},
      {"torch.ByteStorage", c10::ScalarType::Byte},         {"torch.BoolStorage", c10::ScalarType::Bool},
  };
  auto it = table.find(global_name);
  return it == table.end() ? c10::ScalarType::Undefined : it->second;
}

const Value* Unpickled::find(const Value& dict, const std::string& key) {
  const Value* found = nullptr;
  for (const auto& [k, v] : dict.entries) {
    if (k->kind == Kind::String && k->text == key) found = v;  // the last duplicate wins, as in Python
  }
  return found;
}

std::string Unpickled::describe(const Value& value) {
  switch (value.kind) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "a bool";
    case Kind::Int:
      return "an int";
    case Kind::Float:
      return "a float";
    case Kind::String:
      return "a string";
    case Kind::List:
      return "a list";
    case Kind::Tuple:
      return "a tuple";
    case Kind::Dict:
      return "a dict";
    case Kind::Global:
      return "'" + value.text + "'";
    case Kind::Storage:
      return "a storage";
    case Kind::Tensor:
      return "a tensor";
    case Kind::Refused:
      return "an object built by '" + value.text + "'";
    case Kind::Invalid:
      return "an unusable value (" + value.text + ")";
  }
  return "an unknown value";
}

class Unpickler {
 public:
  Unpickler(const char* data, size_t size) : data_(data), size_(size) {}

  Unpickled run() {
    while (true) {
      op_offset_ = pos_;
      const uint8_t op = read_u8();
      if (op == '.') {  // STOP
        out_.root_ = pop("STOP");
        return std::move(out_);
      }
      step(op);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw PickleError("offset " + std::to_string(op_offset_) + ": " + what);
  }

  // --- reading the stream ---
  const char* take(uint64_t n) {
    if (n > size_ - pos_) fail("truncated (needs " + std::to_string(n) + " more bytes)");
    const char* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  uint8_t read_u8() { return static_cast<uint8_t>(*take(1)); }
  uint64_t read_le(int bytes) {
    const auto* p = reinterpret_cast<const unsigned char*>(take(bytes));
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }
  std::string read_line() {
    const void* nl = std::memchr(data_ + pos_, '\n', size_ - pos_);
    if (!nl) fail("truncated (unterminated GLOBAL name)");
    const size_t n = static_cast<const char*>(nl) - (data_ + pos_);
    std::string line(take(n), n);
    take(1);
    return line;
  }

  // --- values and the stack ---
  Value* make(Kind kind) {
    out_.arena_.push_back(std::make_unique<Value>());
    out_.arena_.back()->kind = kind;
    return out_.arena_.back().get();
  }
  Value* make_text(Kind kind, std::string text) {
    Value* v = make(kind);
    v->text = std::move(text);
    return v;
  }
  Value* make_int(int64_t i) {
    Value* v = make(Kind::Int);
    v->integer = i;
    return v;
  }
  void push(Value* v) { stack_.push_back(v); }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  Value* pop(const char* op) {
    if (stack_.size() <= floor()) fail(std::string("stack underflow in ") + op);
    Value* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value* top(const char* op) {
    if (stack_.size() <= floor()) fail(std::string("stack underflow in ") + op);
    return stack_.back();
  }
  std::vector<Value*> pop_mark(const char* op) {
    if (marks_.empty()) fail(std::string("no MARK before ") + op);
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Value*> items(stack_.begin() + mark, stack_.end());
    stack_.resize(mark);
    return items;
  }
  Value* make_tuple(const std::vector<Value*>& items) {
    Value* t = make(Kind::Tuple);
    t->items.assign(items.begin(), items.end());
    return t;
  }
  void memo_put(uint64_t index) { memo_[index] = top("memo put"); }
  void memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo index " + std::to_string(index) + " was never stored");
    push(it->second);
  }

  // Python ints wider than 64 bits never occur in a state_dict; keep them as unusable values.
  Value* make_long(uint64_t n_bytes) {
    const auto* p = reinterpret_cast<const unsigned char*>(take(n_bytes));
    if (n_bytes > 8) return make_text(Kind::Invalid, "an integer wider than 64 bits");
    uint64_t v = 0;
    for (int i = static_cast<int>(n_bytes) - 1; i >= 0; --i) v = (v << 8) | p[i];
    if (n_bytes > 0 && n_bytes < 8 && (p[n_bytes - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n_bytes);
    return make_int(static_cast<int64_t>(v));
  }

  Value* make_global(const std::string& module, const std::string& name) {
    std::string dotted = module + "." + name;
    const bool allowed = is_allowed_global(dotted);
    return make_text(allowed ? Kind::Global : Kind::Refused, std::move(dotted));
  }

  // --- the few callables we understand ---
  Value* call(Value* callable, Value* args, const char* op) {
    if (is_placeholder(callable)) return callable;  // never called: stays inert
    if (callable->kind != Kind::Global) fail(std::string(op) + " on " + Unpickled::describe(*callable));
    if (args->kind != Kind::Tuple) fail(std::string(op) + " arguments are not a tuple");
    for (const Value* arg : args->items) {
      // A refused object inside the arguments taints the result, e.g. a tensor subclass.
      if (arg->kind == Kind::Refused) return const_cast<Value*>(arg);
    }
    const std::string& name = callable->text;
    if (name == kOrderedDict) {
      if (!args->items.empty()) return make_text(Kind::Invalid, "OrderedDict called with arguments");
      return make(Kind::Dict);
    }
    if (name == kRebuildTensor) return rebuild_tensor(*args);
    if (name == kRebuildParameter || name == kRebuildParameterWithState) {
      if (args->items.empty()) return make_text(Kind::Invalid, name + " without arguments");
      const Value* data = args->items[0];
      if (data->kind == Kind::Tensor || data->kind == Kind::Invalid) return const_cast<Value*>(data);
      return make_text(Kind::Invalid, name + " of " + Unpickled::describe(*data));
    }
    return make_text(Kind::Invalid, "'" + name + "' called as a function");
  }

  static bool read_ints(const Value* v, std::vector<int64_t>& out) {
    if (v->kind != Kind::Tuple && v->kind != Kind::List) return false;
    for (const Value* item : v->items) {
      if (item->kind != Kind::Int || item->integer < 0) return false;
      out.push_back(item->integer);
    }
    return true;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks
  // [, metadata]): checked here against the storage's declared length so that reading it later
  // can never index outside the storage.
  Value* rebuild_tensor(const Value& args) {
    auto invalid = [&](const std::string& why) { return make_text(Kind::Invalid, "_rebuild_tensor_v2: " + why); };
    if (args.items.size() != 6 && args.items.size() != 7) return invalid("expects 6 or 7 arguments");
    const Value* storage = args.items[0];
    if (storage->kind == Kind::Invalid) return const_cast<Value*>(storage);
    if (storage->kind != Kind::Storage) return invalid("storage is " + Unpickled::describe(*storage));
    const Value* offset = args.items[1];
    if (offset->kind != Kind::Int || offset->integer < 0) return invalid("bad storage offset");
    Value* t = make(Kind::Tensor);
    if (!read_ints(args.items[2], t->sizes)) return invalid("sizes are not non-negative ints");
    if (!read_ints(args.items[3], t->strides)) return invalid("strides are not non-negative ints");
    if (t->sizes.size() != t->strides.size()) return invalid("sizes and strides differ in length");
    t->storage = storage;
    t->storage_offset = offset->integer;
    int64_t last = offset->integer;  // index of the last element the view touches
    bool empty = false;
    for (size_t d = 0; d < t->sizes.size(); ++d) {
      if (t->sizes[d] == 0) empty = true;
      if (!empty && !add_mul_checked(last, t->sizes[d] - 1, t->strides[d])) {
        return invalid("sizes and strides overflow");
      }
    }
    if (!empty && last >= storage->numel) {
      return invalid("view reaches element " + std::to_string(last) + " of a storage of " +
                     std::to_string(storage->numel));
    }
    if (empty && offset->integer > storage->numel) return invalid("offset past the storage");
    // Stride-0 views may repeat elements; a tiny file must still not ask for terabytes.
    int64_t numel = 1;
    for (int64_t size : t->sizes) {
      if (__builtin_mul_overflow(numel, size, &numel)) return invalid("size overflows");
    }
    if (numel > storage->numel && numel > kMaxRepeatedViewNumel) {
      return invalid("a view of " + std::to_string(numel) + " elements over a storage of " +
                     std::to_string(storage->numel));
    }
    return t;
  }

  // ('storage', torch.<Dtype>Storage, key, location, numel)
  Value* persistent_load(Value* pid) {
    if (pid->kind != Kind::Tuple || pid->items.size() != 5 || pid->items[0]->kind != Kind::String ||
        pid->items[0]->text != "storage") {
      return make_text(Kind::Invalid, "persistent id is not a ('storage', ...) tuple");
    }
    const Value* type = pid->items[1];
    if (type->kind == Kind::Refused) return const_cast<Value*>(type);
    const Value* key = pid->items[2];
    const Value* numel = pid->items[4];
    if (type->kind != Kind::Global || storage_dtype(type->text) == c10::ScalarType::Undefined ||
        key->kind != Kind::String || numel->kind != Kind::Int || numel->integer < 0) {
      return make_text(Kind::Invalid, "malformed storage persistent id");
    }
    Value* s = make_text(Kind::Storage, key->text);
    s->dtype = storage_dtype(type->text);
    s->numel = numel->integer;
    if (s->numel > std::numeric_limits<int64_t>::max() / 8) {
      return make_text(Kind::Invalid, "storage of " + std::to_string(s->numel) + " elements");
    }
    return s;
  }

  void add_items(const char* op) {
    std::vector<Value*> items = pop_mark(op);
    Value* target = top(op);
    if (is_placeholder(target)) return;
    if (target->kind != Kind::List) fail(std::string(op) + " on " + Unpickled::describe(*target));
    target->items.insert(target->items.end(), items.begin(), items.end());
  }
  void set_items(Value* target, const std::vector<Value*>& kv, const char* op) {
    if (kv.size() % 2) fail(std::string(op) + " with an odd number of items");
    if (is_placeholder(target)) return;  // e.g. a refused dict subclass such as yacs' CfgNode
    if (target->kind != Kind::Dict) fail(std::string(op) + " on " + Unpickled::describe(*target));
    for (size_t i = 0; i < kv.size(); i += 2) target->entries.emplace_back(kv[i], kv[i + 1]);
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint8_t proto = read_u8();
        if (proto > 5) fail("unsupported pickle protocol " + std::to_string(proto));
        break;
      }
      case 0x95:
        take(8);
        break;  // FRAME: framing is irrelevant in memory
      case '}':
        push(make(Kind::Dict));
        break;  // EMPTY_DICT
      case ']':
        push(make(Kind::List));
        break;  // EMPTY_LIST
      case 0x8f:
        push(make(Kind::List));
        break;  // EMPTY_SET
      case ')':
        push(make(Kind::Tuple));
        break;  // EMPTY_TUPLE
      case '(':
        marks_.push_back(stack_.size());
        break;  // MARK
      case '0':
        pop("POP");
        break;
      case '1':
        pop_mark("POP_MARK");
        break;
      case '2':
        push(top("DUP"));
        break;
      case 'N':
        push(make(Kind::None));
        break;
      case 0x88:    // NEWTRUE
      case 0x89: {  // NEWFALSE
        Value* b = make(Kind::Bool);
        b->boolean = op == 0x88;
        push(b);
        break;
      }
      case 'J':
        push(make_int(static_cast<int32_t>(read_le(4))));
        break;  // BININT
      case 'K':
        push(make_int(read_le(1)));
        break;  // BININT1
      case 'M':
        push(make_int(read_le(2)));
        break;  // BININT2
      case 0x8a:
        push(make_long(read_le(1)));
        break;      // LONG1
      case 0x8b: {  // LONG4
        const auto n = static_cast<int32_t>(read_le(4));
        if (n < 0) fail("negative LONG4 length");
        push(make_long(n));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        const auto* p = reinterpret_cast<const unsigned char*>(take(8));
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];
        Value* f = make(Kind::Float);
        std::memcpy(&f->real, &bits, sizeof bits);
        push(f);
        break;
      }
      case 'X':
        push_string(read_le(4));
        break;  // BINUNICODE
      case 0x8c:
        push_string(read_le(1));
        break;  // SHORT_BINUNICODE
      case 0x8d:
        push_string(read_le(8));
        break;  // BINUNICODE8
      case 'B':
        push_string(read_le(4));
        break;  // BINBYTES
      case 'C':
        push_string(read_le(1));
        break;  // SHORT_BINBYTES
      case 0x8e:
        push_string(read_le(8));
        break;  // BINBYTES8
      case 'U':
        push_string(read_le(1));
        break;     // SHORT_BINSTRING (Python 2 str)
      case 'T': {  // BINSTRING
        const auto n = static_cast<int32_t>(read_le(4));
        if (n < 0) fail("negative BINSTRING length");
        push_string(n);
        break;
      }
      case 't':
        push(make_tuple(pop_mark("TUPLE")));
        break;
      case 0x85:  // TUPLE1..3
      case 0x86:
      case 0x87: {
        std::vector<Value*> items(op - 0x84);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop("TUPLEn");
        push(make_tuple(items));
        break;
      }
      case 'l': {  // LIST
        Value* list = make(Kind::List);
        for (Value* v : pop_mark("LIST")) list->items.push_back(v);
        push(list);
        break;
      }
      case 'd': {  // DICT
        std::vector<Value*> kv = pop_mark("DICT");
        Value* dict = make(Kind::Dict);
        set_items(dict, kv, "DICT");
        push(dict);
        break;
      }
      case 'q':
        memo_put(read_le(1));
        break;  // BINPUT
      case 'r':
        memo_put(read_le(4));
        break;  // LONG_BINPUT
      case 0x94:
        memo_put(memo_.size());
        break;  // MEMOIZE
      case 'h':
        memo_get(read_le(1));
        break;  // BINGET
      case 'j':
        memo_get(read_le(4));
        break;     // LONG_BINGET
      case 's': {  // SETITEM
        Value* value = pop("SETITEM");
        Value* key = pop("SETITEM");
        set_items(top("SETITEM"), {key, value}, "SETITEM");
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<Value*> kv = pop_mark("SETITEMS");
        set_items(top("SETITEMS"), kv, "SETITEMS");
        break;
      }
      case 'a': {  // APPEND
        Value* item = pop("APPEND");
        Value* target = top("APPEND");
        if (is_placeholder(target)) break;
        if (target->kind != Kind::List) fail("APPEND on " + Unpickled::describe(*target));
        target->items.push_back(item);
        break;
      }
      case 'e':
        add_items("APPENDS");
        break;
      case 0x90:
        add_items("ADDITEMS");
        break;
      case 0x91:
        push(make_tuple(pop_mark("FROZENSET")));
        break;
      case 'c': {  // GLOBAL "module\nname\n"
        std::string module = read_line();
        std::string name = read_line();
        push(make_global(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        Value* name = pop("STACK_GLOBAL");
        Value* module = pop("STACK_GLOBAL");
        if (module->kind != Kind::String || name->kind != Kind::String) {
          fail("STACK_GLOBAL names are not strings");
        }
        push(make_global(module->text, name->text));
        break;
      }
      case 'R': {  // REDUCE
        Value* args = pop("REDUCE");
        Value* callable = pop("REDUCE");
        push(call(callable, args, "REDUCE"));
        break;
      }
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args)
        Value* args = pop("NEWOBJ");
        Value* cls = pop("NEWOBJ");
        push(new_object(cls, args));
        break;
      }
      case 0x92: {         // NEWOBJ_EX
        pop("NEWOBJ_EX");  // kwargs
        Value* args = pop("NEWOBJ_EX");
        Value* cls = pop("NEWOBJ_EX");
        push(new_object(cls, args));
        break;
      }
      case 'Q':
        push(persistent_load(pop("BINPERSID")));
        break;
      case 'b': {  // BUILD: set state. OrderedDict state_dicts carry `_metadata` this way.
        pop("BUILD");
        Value* target = top("BUILD");
        const Kind k = target->kind;
        if (k != Kind::Dict && k != Kind::Tensor && !is_placeholder(target)) {
          stack_.back() = make_text(Kind::Invalid, "BUILD on " + Unpickled::describe(*target));
        }
        break;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("unsupported pickle opcode ") + hex);
      }
    }
  }

  void push_string(uint64_t n) { push(make_text(Kind::String, std::string(take(n), n))); }

  Value* new_object(Value* cls, Value* args) {
    if (is_placeholder(cls)) return cls;
    if (cls->kind == Kind::Global && cls->text == kOrderedDict) return call(cls, args, "NEWOBJ");
    if (cls->kind != Kind::Global) fail("NEWOBJ on " + Unpickled::describe(*cls));
    return make_text(Kind::Invalid, "'" + cls->text + "' instantiated");
  }

  const char* data_;
  size_t size_;
  size_t pos_ = 0;
  size_t op_offset_ = 0;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value*> memo_;
  Unpickled out_;
};

Unpickled unpickle(const char* data, size_t size) { return Unpickler(data, size).run(); }

}  // namespace attnscope::pickle
