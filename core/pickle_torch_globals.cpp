// The torch allow-list of the restricted unpickler (see pickle_torch_globals.h): storage classes,
// OrderedDict, and the tensor rebuilds, each checked against what it may reach before it exists.
#include "core/pickle_torch_globals.h"

#include <limits>
#include <map>
#include <vector>

#include "core/excerpt.h"

namespace attnscope::pickle {
namespace {

// The globals a torch.save'd state_dict legitimately needs, besides the storage classes.
constexpr const char* kOrderedDict = "collections.OrderedDict";
constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr const char* kRebuildParameter = "torch._utils._rebuild_parameter";
constexpr const char* kRebuildParameterWithState = "torch._utils._rebuild_parameter_with_state";

// Larger views than their storage (expanded buffers) are rare and small in real checkpoints.
constexpr int64_t kMaxRepeatedViewNumel = int64_t{1} << 28;

// acc += a * b; false when the result does not fit in int64.
bool add_mul_checked(int64_t& acc, int64_t a, int64_t b) {
  int64_t product = 0;
  return !__builtin_mul_overflow(a, b, &product) && !__builtin_add_overflow(acc, product, &acc);
}

bool read_non_negative_ints(const Value* v, std::vector<int64_t>& out) {
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
Value* rebuild_tensor(ValueMaker& values, const Value& args) {
  auto invalid = [&](const std::string& why) { return values.make_text(Kind::Invalid, "_rebuild_tensor_v2: " + why); };
  if (args.items.size() != 6 && args.items.size() != 7) return invalid("expects 6 or 7 arguments");
  const Value* storage = args.items[0];
  if (storage->kind == Kind::Invalid) return const_cast<Value*>(storage);
  if (storage->kind != Kind::Storage) return invalid("storage is " + Unpickled::describe(*storage));
  const Value* offset = args.items[1];
  if (offset->kind != Kind::Int || offset->integer < 0) return invalid("bad storage offset");
  if (args.items[2]->items.size() > kMaxTensorDims) return invalid("more than 64 dimensions");
  Value* t = values.make(Kind::Tensor);
  if (!read_non_negative_ints(args.items[2], t->sizes)) return invalid("sizes are not non-negative ints");
  if (!read_non_negative_ints(args.items[3], t->strides)) return invalid("strides are not non-negative ints");
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

bool is_allowed_global(const std::string& name) {
  return name == kOrderedDict || name == kRebuildTensor || name == kRebuildParameter ||
         name == kRebuildParameterWithState || storage_dtype(name) != c10::ScalarType::Undefined;
}

bool is_instantiable_global(const std::string& name) { return name == kOrderedDict; }

Value* call_allowed_global(ValueMaker& values, const std::string& name, const Value& args) {
  if (name == kOrderedDict) {
    if (!args.items.empty()) return values.make_text(Kind::Invalid, "OrderedDict called with arguments");
    return values.make(Kind::Dict);
  }
  if (name == kRebuildTensor) return rebuild_tensor(values, args);
  if (name == kRebuildParameter || name == kRebuildParameterWithState) {
    if (args.items.empty()) return values.make_text(Kind::Invalid, name + " without arguments");
    const Value* data = args.items[0];
    if (data->kind == Kind::Tensor || data->kind == Kind::Invalid) return const_cast<Value*>(data);
    return values.make_text(Kind::Invalid, name + " of " + Unpickled::describe(*data));
  }
  return values.make_text(Kind::Invalid, "'" + excerpt(name) + "' called as a function");
}

Value* persistent_load(ValueMaker& values, Value* pid) {
  if (pid->kind != Kind::Tuple || pid->items.size() != 5 || pid->items[0]->kind != Kind::String ||
      pid->items[0]->text != "storage") {
    return values.make_text(Kind::Invalid, "persistent id is not a ('storage', ...) tuple");
  }
  const Value* type = pid->items[1];
  if (type->kind == Kind::Refused) return const_cast<Value*>(type);
  const Value* key = pid->items[2];
  const Value* numel = pid->items[4];
  if (type->kind != Kind::Global || storage_dtype(type->text) == c10::ScalarType::Undefined ||
      key->kind != Kind::String || key->text.size() > kMaxGlobalNameBytes || numel->kind != Kind::Int ||
      numel->integer < 0) {
    return values.make_text(Kind::Invalid, "malformed storage persistent id");
  }
  Value* s = values.make_text(Kind::Storage, key->text);
  s->dtype = storage_dtype(type->text);
  s->numel = numel->integer;
  if (s->numel > std::numeric_limits<int64_t>::max() / 8) {
    return values.make_text(Kind::Invalid, "storage of " + std::to_string(s->numel) + " elements");
  }
  return s;
}

}  // namespace attnscope::pickle
