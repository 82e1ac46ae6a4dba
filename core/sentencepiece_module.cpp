// The module behind core/sentencepiece_backend.h: libsentencepiece's processor, built as its own
// shared library so that the process never links libsentencepiece directly.
#include <sentencepiece_processor.h>

#include "core/sentencepiece_backend.h"

namespace {

class Processor : public attnscope::SentencePieceBackend {
 public:
  sentencepiece::SentencePieceProcessor processor;

  int piece_size() const override { return processor.GetPieceSize(); }
  int eos_id() const override { return processor.eos_id(); }
  int pad_id() const override { return processor.pad_id(); }
  int unk_id() const override { return processor.unk_id(); }
  bool is_control(int id) const override { return processor.IsControl(id); }
  int piece_to_id(const std::string& piece) const override { return processor.PieceToId(piece); }
  std::string id_to_piece(int id) const override { return processor.IdToPiece(id); }
  std::vector<int> encode_ids(const std::string& text) const override {
    std::vector<int> ids;
    processor.Encode(text, &ids).IgnoreError();
    return ids;
  }
  std::vector<std::string> encode_pieces(const std::string& text) const override {
    std::vector<std::string> pieces;
    processor.Encode(text, &pieces).IgnoreError();
    return pieces;
  }
};

}  // namespace

extern "C" __attribute__((visibility("default"))) attnscope::SentencePieceBackend* attnscope_sentencepiece_load(
    const std::string* serialized_model, std::string* error) {
  try {
    auto backend = std::make_unique<Processor>();
    if (const auto status = backend->processor.LoadFromSerializedProto(*serialized_model); !status.ok()) {
      *error = status.ToString();
      return nullptr;
    }
    return backend.release();
  } catch (const std::exception& exception) {
    *error = exception.what();
    return nullptr;
  }
}
