// The restricted unpickler's opcode machine (see pickle_reader.h): nothing here imports or calls
// Python code; opcodes become inert values, globals outside the allow-list Kind::Refused markers.
#include "core/pickle_reader.h"

#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "core/excerpt.h"
#include "core/pickle_text_arguments.h"
#include "core/pickle_torch_globals.h"

namespace attnscope::pickle {
namespace {

bool is_placeholder(const Value* v) { return v->kind == Kind::Refused || v->kind == Kind::Invalid; }

}  // namespace

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

// The opcode machine: the stream, the stack, marks and memo, each within its bound. What a global
// may build is decided by the torch allow-list (core/pickle_torch_globals.h).
class Unpickler : private ValueMaker {
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
      try {
        step(op);
      } catch (const MalformedText& e) {
        fail(e.what());
      }
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
  Value* make(Kind kind) override {
    if (out_.arena_.size() == kMaxPickleValues) over_limit(std::to_string(kMaxPickleValues) + " values");
    out_.arena_.push_back(std::make_unique<Value>());
    out_.arena_.back()->kind = kind;
    return out_.arena_.back().get();
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

  // --- calls: only an allowed global builds anything, through the allow-list ---
  Value* call(Value* callable, Value* args, const char* op) {
    if (is_placeholder(callable)) return callable;  // never called: stays inert
    if (callable->kind != Kind::Global) fail(std::string(op) + " on " + Unpickled::describe(*callable));
    if (args->kind != Kind::Tuple) fail(std::string(op) + " arguments are not a tuple");
    for (const Value* arg : args->items) {
      // A refused object inside the arguments taints the result, e.g. a tensor subclass.
      if (arg->kind == Kind::Refused) return const_cast<Value*>(arg);
    }
    return call_allowed_global(*this, callable->text, *args);
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
        push(persistent_load(*this, pop("BINPERSID")));
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
        push(make_text(Kind::String, decode_raw_unicode_escape(read_line())));
        break;  // UNICODE
      case 'S':
        push(make_text(Kind::String, decode_quoted_string(read_line())));
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

  Value* text_integer(const std::string& text) {
    if (text == "00" || text == "01") {  // INT's True and False
      Value* b = make(Kind::Bool);
      b->boolean = text == "01";
      return b;
    }
    int64_t value = 0;
    if (!parse_text_integer(text, value)) return make_text(Kind::Invalid, "an integer wider than 64 bits");
    return make_int(value);
  }
  uint64_t text_memo_index(const std::string& text) {
    int64_t index = 0;
    if (!parse_text_integer(text, index) || index < 0) fail("malformed memo index '" + excerpt(text, 40) + "'");
    return uint64_t(index);
  }
  Value* text_float(const std::string& text) {
    Value* f = make(Kind::Float);
    f->real = parse_text_float(text);
    return f;
  }
  Value* new_object(Value* cls, Value* args) {
    if (is_placeholder(cls)) return cls;
    if (cls->kind != Kind::Global) fail("NEWOBJ on " + Unpickled::describe(*cls));
    if (is_instantiable_global(cls->text)) return call(cls, args, "NEWOBJ");
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
