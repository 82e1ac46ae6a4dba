// Which reader a checkpoint goes to, decided by its first bytes, not its extension: a zip to the torch
// reader (core/checkpoint_torch_zip.cpp), a JSON header to safetensors (core/checkpoint_safetensors.cpp).
#include "core/checkpoint.h"

#include <string>

#include <caffe2/serialize/inline_container.h>

#include "core/checkpoint_reading.h"
#include "core/image_header.h"
#include "core/zip_archive.h"

namespace attnscope {
namespace {

// torch.save(..., _use_new_zipfile_serialization=False) starts with a pickled magic number.
bool is_legacy_torch_pickle(const std::string& head) {
  static const std::string magic("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14);
  return head.compare(0, magic.size(), magic) == 0;
}

}  // namespace

bool is_torchscript_archive(const std::string& path) {
  try {
    std::string head(4, '\0');
    {
      std::ifstream in = open_checkpoint_file(path);
      in.read(head.data(), 4);
      if (in.gcount() != 4 || head != "PK\x03\x04") return false;
    }
    return open_torch_zip(path)->hasRecord("constants.pkl");
  } catch (const std::exception&) {
    return false;
  }
}

Checkpoint load_checkpoint(const std::string& path, const std::string& container) {
  std::string head(16, '\0');
  {
    std::ifstream in = open_checkpoint_file(path);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
  }
  // Any zip signature (an empty zip starts with its end record, PK\x05\x06) goes to the zip reader.
  if (head.compare(0, 2, "PK") == 0) {
    if (head.compare(0, 4, "PK\x05\x06") == 0)
      bad_checkpoint(path, "an empty zip archive: not a torch.save checkpoint");
    return load_pytorch_zip(path, container);
  }
  // A safetensors header is JSON right after its 8-byte length; the length's low byte can be 0x80,
  // so this must be decided before the pickle checks below.
  if (head.size() > 8 && head[8] == '{') return load_safetensors(path);
  if (is_legacy_torch_pickle(head)) {
    bad_checkpoint(path,
                   "a legacy (pre-1.6, non-zip) PyTorch checkpoint, which attnscope does not read; "
                   "re-save it with torch.save in PyTorch >= 1.6, or " +
                       std::string(kCheckpointConvertHint));
  }
  // Files that are something else entirely, named for what they are (read as safetensors, a PNG's
  // first eight bytes made "a header length of 727905341920923785").
  if (const std::string image = image_format_of(head); !image.empty())
    bad_checkpoint(path, "a " + image + " image, not a checkpoint (did you mean --image?)");
  static const std::vector<std::pair<std::string, std::string>> kOtherFormats = {
      {"GIF8", "a GIF image, not a checkpoint"},
      {"\x89HDF",
       "an HDF5 file (Keras or TensorFlow weights): attnscope reads PyTorch (.pth/.bin/.pt) and "
       "safetensors checkpoints"},
      {"\x93NUMPY", "a NumPy array (.npy), not a checkpoint"},
      {"GGUF", "a GGUF file (llama.cpp's format): attnscope reads PyTorch and safetensors checkpoints"},
  };
  for (const auto& [magic, what] : kOtherFormats)
    if (head.compare(0, magic.size(), magic) == 0) bad_checkpoint(path, what);
  if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80) {
    bad_checkpoint(path,
                   std::string("a plain Python pickle, not a checkpoint attnscope reads; ") + kCheckpointConvertHint);
  }
  return load_safetensors(path);
}

}  // namespace attnscope
