// A restricted unpickler for the data.pkl of torch.save archives: it builds plain values and
// tensor descriptions, and turns every other class or function into an inert placeholder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/ScalarType.h>

namespace attnscope::pickle {

// A malformed pickle stream (truncated, bad opcode, stack underflow...). Refused globals are
// not errors at this level: they become Kind::Refused values.
class PickleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Kind {
  None,
  Bool,
  Int,
  Float,
  String,  // str, and bytes (kept as raw bytes)
  List,    // list, and set (order is irrelevant to us)
  Tuple,
  Dict,     // dict and collections.OrderedDict, insertion order kept
  Global,   // an allowed global before it is called (e.g. torch.FloatStorage)
  Storage,  // a persistent id ('storage', <StorageType>, key, location, numel)
  Tensor,   // the result of torch._utils._rebuild_tensor_v2, not yet read from the archive
  Refused,  // anything built from a global we do not allow; `text` names the global
  Invalid,  // an allowed global called with arguments we cannot use; `text` says why
};

struct Value {
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;                 // String, Global (dotted name), Storage (record key), Refused, Invalid
  std::vector<const Value*> items;  // List, Tuple
  std::vector<std::pair<const Value*, const Value*>> entries;  // Dict

  // Storage
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  int64_t numel = 0;
  // Tensor
  const Value* storage = nullptr;
  int64_t storage_offset = 0;
  std::vector<int64_t> sizes, strides;
};

// The decoded object graph. Values are owned by the arena and may be shared (pickle memo) or
// even cyclic, so they are handed out as plain const pointers valid while this lives.
class Unpickled {
 public:
  const Value* root() const { return root_; }

  // The value stored under string key `key` in dict `dict`, or nullptr.
  static const Value* find(const Value& dict, const std::string& key);
  // A short description for messages: "a dict", "'argparse.Namespace'", ...
  static std::string describe(const Value& value);

 private:
  friend class Unpickler;
  std::vector<std::unique_ptr<Value>> arena_;
  const Value* root_ = nullptr;
};

// Bounds on what a pickle may make the reader hold, checked as it goes: a one-byte opcode can make
// a 200-byte value or a memo entry, so without them a 50 MB pickle could take gigabytes. A
// ViT-g state_dict needs about 20,000 values.
constexpr uint64_t kMaxPickleOpcodes = uint64_t(1) << 24;
constexpr size_t kMaxPickleValues = size_t(1) << 20;
constexpr size_t kMaxPickleMemo = size_t(1) << 20;
constexpr size_t kMaxPickleStack = size_t(1) << 20;  // stack entries and marks together
constexpr size_t kMaxGlobalNameBytes = 1024;         // module.name of a global; also a storage key's length
constexpr size_t kMaxTensorDims = 64;

// Decodes a pickle (protocols 0-5 as written by pickle/torch.save). Calls nothing: the only
// globals understood are collections.OrderedDict, torch._utils._rebuild_tensor_v2 and
// _rebuild_parameter(_with_state), and the torch.<Dtype>Storage classes of supported dtypes.
Unpickled unpickle(const char* data, size_t size);

// The storage class name -> dtype table ("torch.FloatStorage" -> Float); Undefined if unknown.
// Part of the allow-list, in core/pickle_torch_globals.cpp.
c10::ScalarType storage_dtype(const std::string& global_name);

}  // namespace attnscope::pickle
