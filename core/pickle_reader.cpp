// Restricted unpickler: see pickle_reader.h. Nothing here imports or calls Python code; the
// opcodes are interpreted into inert values, and unknown globals into Kind::Refused markers.
#include "core/pickle_reader.h"

#include "core/excerpt.h"

#include <cctype>
#include <charconv>
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
      return "'" + excerpt(value.text) + "'";
    case Kind::Storage:
      return "a storage";
    case Kind::Tensor:
      return "a tensor";
    case Kind::Refused:
      return "an object built by '" + excerpt(value.text) + "'";
    case Kind::Invalid:
      return "an unusable value (" + excerpt(value.text) + ")";
  }
  return "an unknown value";
}

class Unpickler {
 public:
  Unpickler(const char* data, size_t size) : data_(data), size_(size) {}

  Unpickled run() {
    for (uint64_t ops = 0;; ++ops) {
      if (ops == kMaxPickleOpcodes) over_limit(std::to_string(kMaxPickleOpcodes) + " opcodes");
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
  // Each bound is far above what a state_dict needs and keeps memory near the pickle's own size.
  [[noreturn]] void over_limit(const std::string& what) const {
    fail("the pickle needs more than " + what + ", far more than any state_dict: the file is damaged or hostile");
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
  // The argument of a text opcode (protocol 0 and 1): up to the next newline.
  std::string read_line() {
    const void* nl = std::memchr(data_ + pos_, '\n', size_ - pos_);
    if (!nl) fail("truncated (unterminated line of a text opcode)");
    const size_t n = static_cast<const char*>(nl) - (data_ + pos_);
    std::string line(take(n), n);
    take(1);
    return line;
  }

  // --- values and the stack ---
  Value* make(Kind kind) {
    if (out_.arena_.size() == kMaxPickleValues) over_limit(std::to_string(kMaxPickleValues) + " values");
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
  void push(Value* v) {
    if (stack_.size() + marks_.size() >= kMaxPickleStack) over_limit("a stack of " + std::to_string(kMaxPickleStack));
    stack_.push_back(v);
  }
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
  void memo_put(uint64_t index) {
    Value* value = top("memo put");
    if (memo_.size() == kMaxPickleMemo && !memo_.count(index))
      over_limit(std::to_string(kMaxPickleMemo) + " memo entries");
    memo_[index] = value;
  }
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
    // Never an allowed global; cut so that a memoised huge name cannot be copied again and again.
    if (module.size() + name.size() > kMaxGlobalNameBytes)
      return make_text(Kind::Refused, excerpt(module) + "." + excerpt(name));
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
    return make_text(Kind::Invalid, "'" + excerpt(name) + "' called as a function");
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
    if (args.items[2]->items.size() > kMaxTensorDims) return invalid("more than 64 dimensions");
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
        key->kind != Kind::String || key->text.size() > kMaxGlobalNameBytes || numel->kind != Kind::Int ||
        numel->integer < 0) {
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
        if (stack_.size() + marks_.size() >= kMaxPickleStack)
          over_limit("a stack of " + std::to_string(kMaxPickleStack));
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
      case 'I':
        push(text_integer(read_line()));
        break;  // INT (protocol 0 and 1; also True and False before protocol 2)
      case 'L':
        push(text_integer(read_line()));
        break;  // LONG
      case 'F':
        push(text_float(read_line()));
        break;  // FLOAT
      case 'V':
        push(make_text(Kind::String, raw_unicode_escape(read_line())));
        break;  // UNICODE
      case 'S':
        push(make_text(Kind::String, quoted_string(read_line())));
        break;  // STRING
      case 'p':
        memo_put(text_memo_index(read_line()));
        break;  // PUT
      case 'g':
        memo_get(text_memo_index(read_line()));
        break;   // GET
      case 'P':  // PERSID: torch.save's persistent ids are tuples, which protocol 0 cannot write
        read_line();
        push(make_text(Kind::Invalid,
                       "a protocol-0 storage reference, which torch.load cannot read either; re-save the "
                       "checkpoint with torch.save's default protocol"));
        break;
      case 'i': {  // INST: module and class as text, arguments since the mark
        std::string module = read_line();
        std::string name = read_line();
        Value* cls = make_global(module, name);
        push(new_object(cls, make_tuple(pop_mark("INST"))));
        break;
      }
      case 'o': {  // OBJ: class and arguments since the mark
        std::vector<Value*> items = pop_mark("OBJ");
        if (items.empty()) fail("OBJ without a class");
        Value* cls = items.front();
        push(new_object(cls, make_tuple(std::vector<Value*>(items.begin() + 1, items.end()))));
        break;
      }
      case 0x96:
        push_string(read_le(8));
        break;  // BYTEARRAY8
      case 0x97:
      case 0x98:
        fail("out-of-band buffers (pickle protocol 5's NEXT_BUFFER), which torch.save never writes");
      case 0x82:
      case 0x83:
      case 0x84:
        fail("a copyreg extension code (EXT1/2/4), which torch.save never writes");
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("unsupported pickle opcode ") + hex);
      }
    }
  }

  void push_string(uint64_t n) { push(make_text(Kind::String, std::string(take(n), n))); }

  // --- protocol 0 and 1: numbers, strings and memo indices written as text lines ---

  // "123", "-5", "123L" as int64; false when the number does not fit (Python ints are unbounded).
  bool parse_integer(std::string text, int64_t& value) const {
    if (!text.empty() && text.back() == 'L') text.pop_back();  // LONG's Python 2 suffix
    size_t at = 0;
    const bool negative = !text.empty() && text[0] == '-';
    if (!text.empty() && (text[0] == '-' || text[0] == '+')) ++at;
    if (at == text.size()) fail("malformed number '" + excerpt(text, 40) + "'");
    uint64_t magnitude = 0;
    for (; at < text.size(); ++at) {
      if (!std::isdigit(static_cast<unsigned char>(text[at]))) fail("malformed number '" + excerpt(text, 40) + "'");
      if (magnitude > (std::numeric_limits<uint64_t>::max() - 9) / 10) return false;
      magnitude = magnitude * 10 + uint64_t(text[at] - '0');
    }
    const uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
    if (magnitude > limit) return false;
    value = negative ? int64_t(0 - magnitude) : int64_t(magnitude);
    return true;
  }
  Value* text_integer(const std::string& text) {
    if (text == "00" || text == "01") {  // INT's True and False
      Value* b = make(Kind::Bool);
      b->boolean = text == "01";
      return b;
    }
    int64_t value = 0;
    if (!parse_integer(text, value)) return make_text(Kind::Invalid, "an integer wider than 64 bits");
    return make_int(value);
  }
  uint64_t text_memo_index(const std::string& text) {
    int64_t index = 0;
    if (!parse_integer(text, index) || index < 0) fail("malformed memo index '" + excerpt(text, 40) + "'");
    return uint64_t(index);
  }
  Value* text_float(const std::string& text) {
    Value* f = make(Kind::Float);
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), f->real);
    if (error != std::errc() || end != text.data() + text.size()) fail("malformed float '" + excerpt(text, 40) + "'");
    return f;
  }
  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += char(code);
    } else if (code < 0x800) {
      out += char(0xC0 | (code >> 6));
      out += char(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += char(0xE0 | (code >> 12));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    } else {
      out += char(0xF0 | (code >> 18));
      out += char(0x80 | ((code >> 12) & 0x3F));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    }
  }
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // `count` hex digits at text[at], or -1.
  static int64_t hex_number(const std::string& text, size_t at, size_t count) {
    if (text.size() - at < count) return -1;
    int64_t value = 0;
    for (size_t i = 0; i < count; ++i) {
      const int digit = hex_digit(text[at + i]);
      if (digit < 0) return -1;
      value = value * 16 + digit;
    }
    return value;
  }
  // UNICODE: Python's raw-unicode-escape (latin-1 bytes, \uXXXX and \UXXXXXXXX) to UTF-8.
  std::string raw_unicode_escape(const std::string& text) const {
    std::string out;
    size_t backslashes = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '\\' && backslashes % 2 == 0 && i + 1 < text.size() && (text[i + 1] == 'u' || text[i + 1] == 'U')) {
        const size_t digits = text[i + 1] == 'u' ? 4 : 8;
        const int64_t code = hex_number(text, i + 2, digits);
        if (code < 0 || code > 0x10FFFF) fail("malformed \\u escape in a UNICODE string");
        append_utf8(out, uint32_t(code));
        i += 1 + digits;
        backslashes = 0;
        continue;
      }
      backslashes = c == '\\' ? backslashes + 1 : 0;
      append_utf8(out, static_cast<unsigned char>(c));
    }
    return out;
  }
  // STRING: a quoted Python 2 str with the escapes of its repr.
  std::string quoted_string(const std::string& text) const {
    if (text.size() < 2 || text.front() != text.back() || (text.front() != '\'' && text.front() != '"'))
      fail("the STRING opcode's argument is not quoted");
    std::string out;
    for (size_t i = 1; i + 1 < text.size(); ++i) {
      if (text[i] != '\\' || i + 2 >= text.size()) {
        out += text[i];
        continue;
      }
      const char e = text[++i];
      static const std::string simple = "\\'\"abfnrtv", replaced = "\\'\"\a\b\f\n\r\t\v";
      if (const size_t k = simple.find(e); k != std::string::npos) {
        out += replaced[k];
      } else if (e == 'x' && hex_number(text, i + 1, 2) >= 0) {
        out += char(hex_number(text, i + 1, 2));
        i += 2;
      } else if (e >= '0' && e <= '7') {
        int value = e - '0';
        for (int k = 0; k < 2 && i + 2 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '7'; ++k)
          value = value * 8 + (text[++i] - '0');
        out += char(value);
      } else {
        out += '\\';
        out += e;
      }
    }
    return out;
  }

  Value* new_object(Value* cls, Value* args) {
    if (is_placeholder(cls)) return cls;
    if (cls->kind == Kind::Global && cls->text == kOrderedDict) return call(cls, args, "NEWOBJ");
    if (cls->kind != Kind::Global) fail("NEWOBJ on " + Unpickled::describe(*cls));
    return make_text(Kind::Invalid, "'" + excerpt(cls->text) + "' instantiated");
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
