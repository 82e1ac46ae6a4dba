// Checkpoint loading against fixtures written by Python (tests/python/make_checkpoint_fixtures.py),
// plus corrupt and hostile inputs, which must all end in a one-line CheckpointError.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/checkpoint.h"
#include "core/pickle_reader.h"
#include "tests/test_folder.h"

namespace fs = std::filesystem;
using namespace std::string_literals;
using attnscope::Checkpoint;
using attnscope::CheckpointError;
using attnscope::load_checkpoint;
using attnscope::load_safetensors;
using attnscope::read_file_contents;
using attnscope::save_safetensors;
using attnscope::TestFolder;
using attnscope::write_file_contents;
using nlohmann::json;

namespace test_checkpoint {

std::string fixture(const std::string& name) {
  return std::string(ATTNSCOPE_TEST_DATA_DIR "/checkpoint_fixtures/") + name;
}

const json& expected() {
  static const json parsed = [] {
    std::ifstream in(fixture("expected.json"));
    return json::parse(in);
  }();
  return parsed;
}

// This test's own folder.
class ScratchDir : public TestFolder {
 public:
  ScratchDir() : TestFolder("ckpt") {}
};

// The CheckpointError message of `load`, or a test failure if it succeeds or throws otherwise.
std::string error_of(const std::function<void()>& load) {
  try {
    load();
  } catch (const CheckpointError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    return message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected CheckpointError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected CheckpointError, but loading succeeded";
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

std::string python_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return "float32";
    case c10::ScalarType::Half:
      return "float16";
    case c10::ScalarType::BFloat16:
      return "bfloat16";
    case c10::ScalarType::Double:
      return "float64";
    case c10::ScalarType::Long:
      return "int64";
    case c10::ScalarType::Int:
      return "int32";
    case c10::ScalarType::Byte:
      return "uint8";
    case c10::ScalarType::Bool:
      return "bool";
    default:
      return c10::toString(type);
  }
}

// Compares every tensor with the dtype, shape, sum and first values Python recorded.
void expect_matches_python(const Checkpoint& ckpt, const std::string& expected_key) {
  const json& want = expected().at(expected_key);
  ASSERT_EQ(ckpt.tensors.size(), want.size()) << expected_key;
  for (const auto& [name, info] : want.items()) {
    SCOPED_TRACE(expected_key + " / " + name);
    auto it = ckpt.tensors.find(name);
    ASSERT_NE(it, ckpt.tensors.end()) << "missing tensor";
    const torch::Tensor& t = it->second;
    EXPECT_EQ(python_dtype(t.scalar_type()), info.at("dtype").get<std::string>());
    EXPECT_EQ(t.sizes().vec(), info.at("shape").get<std::vector<int64_t>>());
    EXPECT_TRUE(t.is_contiguous());
    const torch::Tensor flat = t.to(torch::kDouble).reshape(-1);
    const double sum = flat.numel() ? flat.sum().item<double>() : 0.0;
    EXPECT_NEAR(sum, info.at("sum").get<double>(), 1e-9 * (1 + std::abs(sum)));
    const auto first = info.at("first").get<std::vector<double>>();
    ASSERT_GE(flat.numel(), static_cast<int64_t>(first.size()));
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(flat[i].item<double>(), first[i]) << "element " << i;
    }
  }
}

// ---- safetensors byte builders for the corrupt-input tests ----

std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string load_error_for(const ScratchDir& dir, const std::string& bytes) {
  const std::string path = dir.file("corrupt.safetensors");
  write_file_contents(path, bytes);
  return error_of([&] { load_checkpoint(path); });
}

// ---------------------------------------------------------------- PyTorch zip checkpoints

TEST(CheckpointPytorch, FlatStateDictMatchesPython) {
  const Checkpoint ckpt = load_checkpoint(fixture("flat.pth"));
  EXPECT_EQ(ckpt.format, "pytorch-zip");
  EXPECT_EQ(ckpt.container_key, "");
  EXPECT_TRUE(ckpt.metadata.empty());
  expect_matches_python(ckpt, "flat.pth");
  EXPECT_EQ(ckpt.tensors.at("bn.num_batches_tracked").item<int64_t>(), 7);
}

TEST(CheckpointPytorch, ResearchCheckpointLoadsModelAndIgnoresOtherObjects) {
  const std::string marker = fixture("marker_outside_state_dict");
  fs::remove(marker);
  for (const char* file : {"wrapped.pth", "wrapped_protocol4.pth", "wrapped_protocol1.pth"}) {
    SCOPED_TRACE(file);
    const Checkpoint ckpt = load_checkpoint(fixture(file));
    EXPECT_EQ(ckpt.container_key, "model");
    expect_matches_python(ckpt, "wrapped.pth#model");

    const Checkpoint ema = load_checkpoint(fixture(file), "model_ema");
    EXPECT_EQ(ema.container_key, "model_ema");
    expect_matches_python(ema, "wrapped.pth#model_ema");
  }
  EXPECT_FALSE(fs::exists(marker)) << "a pickled command ran";
}

TEST(CheckpointPytorch, ContainerErrorsNameTheProblem) {
  const std::string path = fixture("wrapped.pth");
  std::string message = error_of([&] { load_checkpoint(path, "teacher"); });
  EXPECT_CONTAINS(message, "no 'teacher' entry");
  EXPECT_CONTAINS(message, "model_ema");  // lists the keys that exist

  message = error_of([&] { load_checkpoint(path, "args"); });
  EXPECT_CONTAINS(message, "argparse.Namespace");
  EXPECT_CONTAINS(message, "scripts/convert_checkpoint.py");

  message = error_of([&] { load_checkpoint(path, "epoch"); });
  EXPECT_CONTAINS(message, "'epoch' is an int, not a state_dict");
}

TEST(CheckpointPytorch, UnknownContainerKeyMustBeNamed) {
  const std::string path = fixture("custom_key.pth");
  const std::string message = error_of([&] { load_checkpoint(path); });
  EXPECT_CONTAINS(message, "no state_dict found");
  EXPECT_CONTAINS(message, "top-level keys: net, args");
  // There is no option naming an entry: the message says how to write the weights out.
  EXPECT_CONTAINS(message, "scripts/convert_checkpoint.py FILE OUT.safetensors --key net");
  const Checkpoint ckpt = load_checkpoint(path, "net");
  EXPECT_EQ(ckpt.container_key, "net");
  expect_matches_python(ckpt, "custom_key.pth");
}

TEST(CheckpointPytorch, RefusesForbiddenObjectInsideStateDictWithoutRunningIt) {
  const std::string marker = fixture("marker_inside_state_dict");
  fs::remove(marker);
  const std::string message = error_of([&] { load_checkpoint(fixture("evil.pth")); });
  EXPECT_CONTAINS(message, fixture("evil.pth") + ": refusing to load");
  EXPECT_CONTAINS(message, "'blocks.0.payload'");
  EXPECT_CONTAINS(message, "'posix.system'");
  EXPECT_CONTAINS(message, "scripts/convert_checkpoint.py");
  EXPECT_FALSE(fs::exists(marker)) << "a pickled command ran";
}

TEST(CheckpointPytorch, DtypesSharedStoragesAndViews) {
  const Checkpoint ckpt = load_checkpoint(fixture("views.pth"));
  expect_matches_python(ckpt, "views.pth");  // also proves 'note' and 'step' were skipped
  const auto& t = ckpt.tensors;
  EXPECT_TRUE(torch::equal(t.at("tied"), t.at("base")));
  EXPECT_TRUE(torch::equal(t.at("transposed"), t.at("base").t()));
  EXPECT_TRUE(torch::equal(
      t.at("strided_slice"),
      t.at("base").index({torch::indexing::Slice(1, 5), torch::indexing::Slice(2, torch::indexing::None, 3)})));
  // Every tensor owns its memory: no aliasing between tied weights.
  EXPECT_NE(t.at("tied").data_ptr(), t.at("base").data_ptr());
  EXPECT_EQ(t.at("scalar").dim(), 0);
}

// Protocol 1 writes ints as text (INT, LONG) and True/False as INT "01"/"00"; protocol 0 writes
// everything as text, storage references included, which torch.load cannot read back.
TEST(CheckpointPytorch, EveryPickleProtocolTorchLoadReadsLoads) {
  for (int protocol = 1; protocol <= 5; ++protocol) {
    const std::string name = "views_protocol" + std::to_string(protocol) + ".pth";
    SCOPED_TRACE(name);
    expect_matches_python(load_checkpoint(fixture(name)), name);
  }
  const std::string message = error_of([&] { load_checkpoint(fixture("views_protocol0.pth")); });
  EXPECT_CONTAINS(message, "a protocol-0 storage reference, which torch.load cannot read either");
  EXPECT_CONTAINS(message, "re-save the checkpoint with torch.save's default protocol");
}

TEST(CheckpointPytorch, StripsDataParallelPrefix) {
  const Checkpoint ckpt = load_checkpoint(fixture("module_prefix.pth"));
  EXPECT_EQ(ckpt.container_key, "state_dict");
  expect_matches_python(ckpt, "module_prefix.pth");
}

TEST(CheckpointPytorch, LegacyFormatGetsAClearError) {
  const std::string message = error_of([&] { load_checkpoint(fixture("legacy.pth")); });
  EXPECT_CONTAINS(message, "legacy (pre-1.6, non-zip)");
  EXPECT_CONTAINS(message, "scripts/convert_checkpoint.py");
}

TEST(CheckpointPytorch, MissingFile) {
  const std::string path = fixture("does_not_exist.pth");
  EXPECT_EQ(error_of([&] { load_checkpoint(path); }), "cannot open " + path + ": No such file or directory");
  EXPECT_CONTAINS(error_of([&] { attnscope::load_pytorch_zip(path); }), "No such file");
  EXPECT_CONTAINS(error_of([&] { load_safetensors(path); }), "No such file");
}

// ---------------------------------------------------------------- safetensors

TEST(CheckpointSafetensors, PythonWrittenFileMatches) {
  const Checkpoint ckpt = load_checkpoint(fixture("mixed.safetensors"));
  EXPECT_EQ(ckpt.format, "safetensors");
  expect_matches_python(ckpt, "mixed.safetensors");
  EXPECT_EQ(ckpt.metadata.at("format"), "pt");
  EXPECT_EQ(ckpt.metadata.at("source"), "make_checkpoint_fixtures.py");
}

TEST(CheckpointSafetensors, ConverterScriptOutputMatchesTheOriginal) {
  // Written by scripts/convert_checkpoint.py from legacy.pth and module_prefix.pth.
  for (const char* file : {"legacy_converted.safetensors", "module_prefix_converted.safetensors"}) {
    SCOPED_TRACE(file);
    const Checkpoint ckpt = load_checkpoint(fixture(file));
    EXPECT_EQ(ckpt.format, "safetensors");
    expect_matches_python(ckpt, file);
    EXPECT_EQ(ckpt.metadata.at("format"), "pt");
  }
  EXPECT_EQ(load_checkpoint(fixture("legacy_converted.safetensors")).metadata.at("source"), "legacy.pth");
}

TEST(CheckpointSafetensors, SaveLoadRoundTrip) {
  ScratchDir dir;
  const Checkpoint source = load_checkpoint(fixture("views.pth"));
  const std::string path = dir.file("round.safetensors");
  std::map<std::string, torch::Tensor> tensors = source.tensors;
  tensors["noncontiguous"] = source.tensors.at("base").t();  // saved as a contiguous copy
  save_safetensors(path, tensors, {{"format", "pt"}, {"note", "round trip"}});

  const Checkpoint loaded = load_safetensors(path);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    EXPECT_EQ(loaded.tensors.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(loaded.tensors.at(name), t)) << name;
  }
  EXPECT_EQ(loaded.metadata.at("note"), "round trip");

  // Header padded with spaces so the data starts 8-byte aligned; keys in sorted order.
  const std::string bytes = read_file_contents(path);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(header_size % 8, 0u);
  const std::string header = bytes.substr(8, header_size);
  EXPECT_LT(header.find("\"base\""), header.find("\"transposed\""));
  EXPECT_EQ(dir.entry_count(), 1u) << "temporary file left behind";
}

TEST(CheckpointSafetensors, SaveRejectsUnsupportedDtypeAndBadDirectory) {
  ScratchDir dir;
  EXPECT_CONTAINS(error_of([&] {
                    save_safetensors(dir.file("c.safetensors"), {{"c", torch::zeros({2}, torch::kComplexFloat)}});
                  }),
                  "cannot save tensor 'c'");
  EXPECT_CONTAINS(error_of([&] {
                    save_safetensors(dir.file("missing/dir/x.safetensors"), {{"x", torch::zeros({2})}});
                  }),
                  "cannot write");
  EXPECT_EQ(dir.entry_count(), 0u);
}

TEST(CheckpointSafetensors, TruncatedAndGarbageFilesAreRejected) {
  ScratchDir dir;
  const std::string valid = read_file_contents(fixture("mixed.safetensors"));
  ASSERT_GT(valid.size(), 64u);
  for (size_t length : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{40}, valid.size() / 2,
                        valid.size() - 8, valid.size() - 1}) {
    SCOPED_TRACE("truncated to " + std::to_string(length));
    EXPECT_FALSE(load_error_for(dir, valid.substr(0, length)).empty());
  }
  std::mt19937 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    std::string garbage(1 + rng() % 2000, '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    EXPECT_FALSE(load_error_for(dir, garbage).empty());
  }
  // Flipping any byte of the header must never crash (it may still parse, e.g. in a name).
  for (size_t i = 0; i < valid.size(); ++i) {
    std::string mutated = valid;
    mutated[i] = static_cast<char>(mutated[i] ^ 0x5a);
    write_file_contents(dir.file("m.safetensors"), mutated);
    try {
      load_checkpoint(dir.file("m.safetensors"));
    } catch (const CheckpointError&) {
    }
  }
}

TEST(CheckpointSafetensors, CorruptHeadersGiveSpecificMessages) {
  ScratchDir dir;
  const std::string f32x12(48, '\0');
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape, int begin, int end) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
           std::to_string(begin) + "," + std::to_string(end) + "]}";
  };
  auto error_for = [&](const std::string& header, const std::string& data) {
    return load_error_for(dir, safetensors_bytes(header, data));
  };
  std::string huge(8, '\xff');
  EXPECT_CONTAINS(load_error_for(dir, huge + "{}"), "exceeds the 100 MB limit");
  EXPECT_CONTAINS(load_error_for(dir, safetensors_bytes("{}", "").substr(0, 8) + "{"), "runs past");
  EXPECT_CONTAINS(error_for("{not json", ""), "not valid JSON");
  EXPECT_CONTAINS(error_for("[1,2]", ""), "not a JSON object");
  EXPECT_CONTAINS(error_for("{" + entry("w", "F32", "[3,4]", 0, 100) + "}", std::string(100, '\0')),
                  "tensor 'w' has data_offsets [0, 100] but shape [3,4] F32 needs 48 bytes");
  EXPECT_CONTAINS(error_for("{" + entry("w", "F32", "[3,4]", 0, 48) + "}", ""), "past the end");
  EXPECT_CONTAINS(error_for("{" + entry("w", "F32", "[-3,4]", 0, 48) + "}", f32x12), "non-negative");
  EXPECT_CONTAINS(error_for("{" + entry("w", "F32", "[3,4.5]", 0, 48) + "}", f32x12), "non-negative");
  EXPECT_CONTAINS(error_for("{" + entry("w", "F32", "[3,4]", 48, 0) + "}", f32x12), "begin > end");
  EXPECT_CONTAINS(error_for("{" + entry("w", "C64", "[3,4]", 0, 48) + "}", f32x12), "unsupported dtype 'C64'");
  EXPECT_CONTAINS(error_for("{" + entry("w", "F32", "[4294967296,4294967296]", 0, 48) + "}", f32x12), "overflows");
  EXPECT_CONTAINS(
      error_for("{" + entry("a", "F32", "[12]", 0, 48) + "," + entry("b", "F32", "[6]", 24, 48) + "}", f32x12),
      "overlap");
  EXPECT_CONTAINS(
      error_for("{" + entry("a", "F32", "[6]", 0, 24) + "," + entry("b", "F32", "[4]", 32, 48) + "}", f32x12),
      "bytes 24..32 of the data (before tensor 'b') belong to no tensor");
  EXPECT_CONTAINS(error_for("{" + entry("a", "F32", "[6]", 0, 24) + "}", std::string(30, '\0')), "the last 6 bytes");
  EXPECT_CONTAINS(error_for("{\"__metadata__\":{\"epoch\":3}}", ""), "__metadata__ must map strings");
  EXPECT_CONTAINS(error_for("{\"w\":{\"dtype\":\"F32\"}}", ""), "no shape");
}

// ---------------------------------------------------------------- hostile pickles

// Rewrites flat.pth with a different data.pkl (valid zip CRCs, so only the unpickler judges it).
std::string rewrite_archive(const ScratchDir& dir, const std::string& pickle, bool truncate_storage = false) {
  caffe2::serialize::PyTorchStreamReader reader(fixture("flat.pth"));
  const std::string path = dir.file("archive.pth");
  caffe2::serialize::PyTorchStreamWriter writer(path);
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  for (const std::string& name : reader.getAllRecords()) {
    if (name == "data.pkl" || name == "version") continue;
    auto [data, size] = reader.getRecord(name);
    writer.writeRecord(name, data.get(), truncate_storage ? size / 2 : size);
  }
  writer.writeEndOfFile();
  return path;
}

std::string original_pickle() {
  caffe2::serialize::PyTorchStreamReader reader(fixture("flat.pth"));
  auto [data, size] = reader.getRecord("data.pkl");
  return std::string(static_cast<const char*>(data.get()), size);
}

TEST(CheckpointPickle, MutatedPicklesNeverCrash) {
  ScratchDir dir;
  const std::string pickle = original_pickle();
  EXPECT_EQ(load_checkpoint(rewrite_archive(dir, pickle)).tensors.size(), expected().at("flat.pth").size());

  for (size_t length = 0; length < pickle.size(); length += 7) {
    EXPECT_CONTAINS(error_of([&] { load_checkpoint(rewrite_archive(dir, pickle.substr(0, length))); }),
                    "corrupt data.pkl");
  }
  std::mt19937 rng(7);
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string mutated = pickle;
    for (int flips = 1 + rng() % 3; flips > 0; --flips) {
      mutated[rng() % mutated.size()] = static_cast<char>(rng());
    }
    try {
      load_checkpoint(rewrite_archive(dir, mutated));
    } catch (const CheckpointError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(CheckpointPickle, DeeplyNestedValuesDoNotExhaustTheStack) {
  ScratchDir dir;
  std::string pickle = original_pickle();
  // state_dict['deep'] = (((...(None,)...),) nested 300000 deep, then a refused global.
  for (const std::string& innermost : {"N"s, "cbuiltins\neval\n"s}) {
    std::string modified = pickle;
    modified.insert(modified.size() - 2,
                    "h\x01X\x04\x00\x00\x00"s + "deep" + innermost + std::string(300'000, '\x85') + "s0");
    const std::string path = rewrite_archive(dir, modified);
    if (innermost == "N") {
      EXPECT_EQ(load_checkpoint(path).tensors.count("deep"), 0u);
    } else {
      EXPECT_CONTAINS(error_of([&] { load_checkpoint(path); }), "'builtins.eval'");
    }
  }
}

TEST(CheckpointPickle, DamagedZipArchivesAreRejected) {
  ScratchDir dir;
  const std::string valid = read_file_contents(fixture("views.pth"));
  const std::string path = dir.file("damaged.pth");
  for (size_t length = 0; length < valid.size(); length += 97) {
    write_file_contents(path, valid.substr(0, length));
    EXPECT_FALSE(error_of([&] { load_checkpoint(path); }).empty());
  }
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::string mutated = valid;
    mutated[4 + rng() % (mutated.size() - 4)] = static_cast<char>(rng());  // keep the zip magic
    write_file_contents(path, mutated);
    try {
      load_checkpoint(path);  // a flip in unused bytes (e.g. padding) may still load
    } catch (const CheckpointError&) {
    }
  }
}

TEST(CheckpointPickle, ShortStorageRecordIsAnError) {
  ScratchDir dir;
  const std::string path = rewrite_archive(dir, original_pickle(), /*truncate_storage=*/true);
  EXPECT_CONTAINS(error_of([&] { load_checkpoint(path); }), "bytes but");
}

TEST(CheckpointPickle, HandWrittenHostileStreams) {
  using attnscope::pickle::PickleError;
  using attnscope::pickle::unpickle;
  auto decode = [](const std::string& bytes) { return unpickle(bytes.data(), bytes.size()); };
  auto pickle_error = [&](const std::string& bytes) {
    try {
      decode(bytes);
    } catch (const PickleError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_CONTAINS(pickle_error("\x80\x02R."s), "stack underflow in REDUCE");
  EXPECT_CONTAINS(pickle_error("\x80\x02h\x05."s), "memo index 5");
  EXPECT_CONTAINS(pickle_error("\x80\x02\xff."s), "unsupported pickle opcode 0xff");
  EXPECT_CONTAINS(pickle_error("\x80\x02X\xff\xff\xff\x7f"s), "truncated");
  EXPECT_CONTAINS(pickle_error("\x80\x02}"s), "truncated");  // no STOP
  EXPECT_CONTAINS(pickle_error("\x80\x02(u."s), "stack underflow in SETITEMS");
  EXPECT_CONTAINS(pickle_error("\x80\x02]K\x01s."s), "stack underflow in SETITEM");
  EXPECT_CONTAINS(pickle_error("\x80\x02]K\x01K\x02s."s), "SETITEM on a list");

  // builtins.eval('...') is never called: it becomes an inert Refused value.
  const auto evil = decode("\x80\x02}X\x01\x00\x00\x00w"s + "cbuiltins\neval\n" + "X\x04\x00\x00\x00"s + "exit\x85Rs.");
  const auto* w = attnscope::pickle::Unpickled::find(*evil.root(), "w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->kind, attnscope::pickle::Kind::Refused);
  EXPECT_EQ(w->text, "builtins.eval");

  // A list that contains itself, stored in a state_dict next to a tensor: skipped, no hang.
  ScratchDir dir;
  std::string pickle = original_pickle();
  // BINGET 1 (the top-level OrderedDict), key, [] memoized as 65535, APPEND it to itself,
  // SETITEM, POP: inserted just before the final BUILD, where the stack is otherwise unchanged.
  const std::string self_list = "h\x01X\x04\x00\x00\x00loop]r\xff\xff\x00\x00"s + "j\xff\xff\x00\x00"s + "as0";
  const size_t build = pickle.rfind("b.");
  ASSERT_EQ(build, pickle.size() - 2);
  pickle.insert(build, self_list);
  const Checkpoint ckpt = load_checkpoint(rewrite_archive(dir, pickle));
  EXPECT_EQ(ckpt.tensors.count("loop"), 0u);
}

// ---------------------------------------------------------------- atomic file writes

TEST(CheckpointAtomicFile, WritesReplacesAndCleansUp) {
  ScratchDir dir;
  const std::string path = dir.file("out.bin");
  attnscope::write_file_atomically(path, [](std::ostream& out) { out << "first"; });
  EXPECT_EQ(read_file_contents(path), "first");
  attnscope::write_file_atomically(path, [](std::ostream& out) { out << "second"; });
  EXPECT_EQ(read_file_contents(path), "second");

  try {
    attnscope::write_file_atomically(
        path, [](std::ostream& out) { out << "x"; }, false);
    ADD_FAILURE() << "overwrote with overwrite=false";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write " + path + ": file exists");
  }
  EXPECT_THROW(attnscope::write_file_atomically(path,
                                                [](std::ostream& out) {
                                                  out << "partial";
                                                  throw std::logic_error("writer failed");
                                                }),
               std::logic_error);
  EXPECT_EQ(read_file_contents(path), "second");
  EXPECT_EQ(dir.entry_count(), 1u) << "temporary file left behind";
}

}  // namespace test_checkpoint
