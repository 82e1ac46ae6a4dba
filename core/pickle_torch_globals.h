// The torch-specific allow-list of the restricted unpickler: the only globals a torch.save'd
// state_dict may name, and what "calling" each of them builds, to be reviewed on its own.
// core/pickle_reader.cpp runs the opcodes within their bounds and calls nothing outside this list.
#pragma once

#include <string>
#include <utility>

#include "core/pickle_reader.h"

namespace attnscope::pickle {

// Makes values in the unpickler's arena (within its bounds); the allow-list builds through it.
class ValueMaker {
 public:
  virtual Value* make(Kind kind) = 0;
  Value* make_text(Kind kind, std::string text) {
    Value* v = make(kind);
    v->text = std::move(text);
    return v;
  }

 protected:
  ~ValueMaker() = default;
};

// collections.OrderedDict, torch._utils._rebuild_tensor_v2, _rebuild_parameter(_with_state) and
// the storage classes of storage_dtype(): the globals that become Kind::Global, not Kind::Refused.
bool is_allowed_global(const std::string& dotted_name);

// The allowed globals NEWOBJ may instantiate (OrderedDict); any other is an unusable value.
bool is_instantiable_global(const std::string& dotted_name);

// The result of calling allowed global `name` with the tuple `args` (in which nothing is refused):
// an empty dict, a checked tensor description, or a Kind::Invalid value saying why not.
Value* call_allowed_global(ValueMaker& values, const std::string& name, const Value& args);

// BINPERSID's ('storage', torch.<Dtype>Storage, key, location, numel) as a Kind::Storage value.
Value* persistent_load(ValueMaker& values, Value* pid);

}  // namespace attnscope::pickle
