// SentencePiece behind a module of its own (libattnscope_sentencepiece.so, core/sentencepiece_module.cpp),
// opened with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) at the first SigLIP prompt. Debian's libsentencepiece
// carries its own protobuf-lite 3.14 and exports it; linked into the process beside LibTorch's
// protobuf 3.21 (through ONNX), its copies interpose the real library's and the process crashes
// while loading. Opened apart, each library binds to its own protobuf. The interface is virtual, so
// the core links no symbol of the module.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace attnscope {

class SentencePieceBackend {
 public:
  virtual ~SentencePieceBackend() = default;
  virtual int piece_size() const = 0;
  virtual int eos_id() const = 0;  // -1 when the model has none
  virtual int pad_id() const = 0;
  virtual int unk_id() const = 0;
  virtual bool is_control(int id) const = 0;
  virtual int piece_to_id(const std::string& piece) const = 0;  // unk_id() for a piece it lacks
  virtual std::string id_to_piece(int id) const = 0;
  virtual std::vector<int> encode_ids(const std::string& text) const = 0;
  virtual std::vector<std::string> encode_pieces(const std::string& text) const = 0;
};

// A model from a serialized ModelProto. Throws std::runtime_error saying why (the module cannot be
// opened, the bytes are not a model).
std::unique_ptr<SentencePieceBackend> load_sentencepiece(const std::string& serialized_model);

}  // namespace attnscope

// The module's one entry point: a new backend, or null with `error` set.
extern "C" attnscope::SentencePieceBackend* attnscope_sentencepiece_load(const std::string* serialized_model,
                                                                         std::string* error);
