// The versioned JSON files and their documents (docs/output_schemas.md for the commands' own kinds,
// docs/analysis_outputs.md generated from the analyses' entries): every kind has its section there
// with the same file and number, and a real run of each kind (an analysis's own example) writes a
// file with every key the section marks "always" and no key it does not list.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/assets.h"
#include "core/output_schemas.h"
#include "tests/test_folder.h"
#include "views/analysis_registry.h"

namespace attnscope {
namespace test_output_schemas {

namespace fs = std::filesystem;

// One row of a table: a key path (`a.b`, `a[].b`), whether it is always there, whether its
// contents are left unlisted (`a.*`), and the block whose rows sit under it, if any.
struct KeyRow {
  std::string path;
  bool always = false;
  bool opaque = false;
  std::string block;
};

struct Section {
  std::string file;
  int version = 0;
  std::vector<KeyRow> rows;
};

// The document's kinds ("## `run`: summary.json, schema 1") and blocks ("## Block `preprocessing`"),
// each with its table rows as written.
struct SchemaDocument {
  std::map<std::string, Section> kinds, blocks;
};

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(' '), last = text.find_last_not_of(' ');
  return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

SchemaDocument parse_schema_document(const std::string& text) {
  static const std::regex kind_heading(R"(^## `([a-z-]+)`: ([a-z.]+), schema (\d+)$)");
  static const std::regex block_heading(R"(^## Block `([a-z-]+)`$)");
  static const std::regex key_cell(R"(^`([^`]+)`$)");
  static const std::regex block_cell(R"(^block `([a-z-]+)`)");
  SchemaDocument document;
  Section* section = nullptr;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_match(line, match, kind_heading)) {
      section = &document.kinds[match[1]];
      section->file = match[2];
      section->version = std::stoi(match[3]);
    } else if (std::regex_match(line, match, block_heading)) {
      section = &document.blocks[match[1]];
    } else if (line.rfind("## ", 0) == 0) {
      section = nullptr;
    } else if (section && line.rfind("| ", 0) == 0 && line.rfind("| key |", 0) != 0) {
      std::vector<std::string> cells;
      std::istringstream row(line.substr(1));
      for (std::string cell; std::getline(row, cell, '|');) cells.push_back(trimmed(cell));
      if (cells.size() < 3) continue;
      KeyRow key;
      key.always = cells[1] == "always";
      if (std::regex_search(cells[0], match, block_cell)) {
        key.block = match[1];  // a block at the top level
      } else if (std::regex_match(cells[0], match, key_cell)) {
        key.path = match[1];
        if (std::regex_search(cells[2], match, block_cell)) key.block = match[1];
        if (key.path.size() > 2 && key.path.compare(key.path.size() - 2, 2, ".*") == 0) {
          key.opaque = true;
          key.path.resize(key.path.size() - 2);
        }
      } else {
        continue;
      }
      section->rows.push_back(key);
    }
  }
  return document;
}

// A kind's rows with its blocks' rows put under the keys that name them.
std::vector<KeyRow> expanded_rows(const SchemaDocument& document, const std::vector<KeyRow>& rows,
                                  const std::string& prefix = "") {
  std::vector<KeyRow> expanded;
  for (KeyRow row : rows) {
    if (!row.path.empty()) {
      row.path = prefix + row.path;
      expanded.push_back(row);
    }
    if (row.block.empty()) continue;
    const auto block = document.blocks.find(row.block);
    if (block == document.blocks.end()) throw std::runtime_error("no block '" + row.block + "' in the document");
    const std::string inner = row.path.empty() ? prefix : row.path + ".";
    for (const KeyRow& nested : expanded_rows(document, block->second.rows, inner)) expanded.push_back(nested);
  }
  return expanded;
}

// A file's key paths, not descending into opaque keys; `arrays` gets "a[]" for each array of objects.
void collect_paths(const nlohmann::json& value, const std::string& path, const std::set<std::string>& opaque,
                   std::set<std::string>& keys, std::set<std::string>& arrays) {
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      const std::string child = path.empty() ? key : path + "." + key;
      keys.insert(child);
      if (!opaque.count(child)) collect_paths(item, child, opaque, keys, arrays);
    }
  } else if (value.is_array()) {
    for (const auto& item : value) {
      if (item.is_object()) arrays.insert(path + "[]");
      collect_paths(item, path + "[]", opaque, keys, arrays);
    }
  }
}

// "a", "a[]", "a[].b" for "a[].b.c": what holds the key, outermost first.
std::vector<std::string> ancestors(const std::string& path) {
  std::vector<std::string> found;
  for (size_t at = 0; at < path.size(); ++at) {
    if (path[at] == '.') found.push_back(path.substr(0, at));
    if (path.compare(at, 2, "[]") == 0) {
      found.push_back(path.substr(0, at));
      found.push_back(path.substr(0, at + 2));
    }
  }
  return found;
}

// What is wrong with `file` against the document's section `kind`: each problem on its own line.
std::vector<std::string> schema_problems(const SchemaDocument& document, const std::string& kind,
                                         const nlohmann::json& file) {
  const auto section = document.kinds.find(kind);
  if (section == document.kinds.end()) return {"the document has no section for kind '" + kind + "'"};
  const std::vector<KeyRow> rows = expanded_rows(document, section->second.rows);
  std::set<std::string> opaque, documented, optional;
  for (const KeyRow& row : rows) {
    if (row.opaque) opaque.insert(row.path);
    if (!row.always) optional.insert(row.path);
    documented.insert(row.path);
    for (const std::string& holder : ancestors(row.path)) documented.insert(holder);
  }
  std::set<std::string> keys, arrays;
  collect_paths(file, "", opaque, keys, arrays);

  std::vector<std::string> problems;
  if (file.value("schema_kind", "") != kind) problems.push_back("schema_kind is not '" + kind + "'");
  if (file.value("schema", -1) != section->second.version)
    problems.push_back("schema is not " + std::to_string(section->second.version));
  for (const std::string& key : keys)
    if (!documented.count(key)) problems.push_back("key '" + key + "' is not in the document");
  for (const KeyRow& row : rows) {
    if (!row.always || keys.count(row.path)) continue;
    // Required where what holds it is there: not under an optional key that is absent, nor in an
    // array that is there without objects (an absent array is itself missing).
    bool held = true;
    for (const std::string& holder : ancestors(row.path)) {
      const bool is_array = holder.size() > 2 && holder.compare(holder.size() - 2, 2, "[]") == 0;
      const std::string array = is_array ? holder.substr(0, holder.size() - 2) : "";
      if (is_array ? keys.count(array) && !arrays.count(holder) : optional.count(holder) && !keys.count(holder))
        held = false;
    }
    if (held) problems.push_back("documented key '" + row.path + "' is missing");
  }
  return problems;
}

const SchemaDocument& schema_document() {
  static const SchemaDocument document = [] {
    SchemaDocument merged =
        parse_schema_document(read_file_contents(std::string(ATTNSCOPE_SOURCE_DIR) + "/docs/output_schemas.md"));
    const SchemaDocument analyses = parse_schema_document(analysis_outputs_markdown());
    merged.kinds.insert(analyses.kinds.begin(), analyses.kinds.end());
    return merged;
  }();
  return document;
}

// Every kind: the commands' own and each analysis's.
std::vector<OutputSchema> every_schema() {
  std::vector<OutputSchema> schemas = output_schemas();
  for (const AnalysisEntry& entry : analysis_registry())
    for (const AnalysisOutput& output : entry.outputs) schemas.push_back(output.schema);
  return schemas;
}

// How each kind's file is made, on the bundled demo model and sample image.
struct KindRun {
  std::string arguments;  // OUT stands for the output folder, GLYPHS for a folder of glyph images
  std::string file;
};

std::string replaced(std::string text, const std::string& from, const std::string& to);

const std::map<std::string, KindRun>& kind_runs() {
  static const std::string source = " --model '" + asset_path("models/flatten.safetensors") + "' --image '" +
                                    asset_path("images/sign_4.png") + "' --out OUT";
  static std::map<std::string, KindRun> runs = {
      {"run", {"run" + source, "summary.json"}},
      {"eval-dino-masks",
       {"eval --images GLYPHS --masks GLYPHS --methods dino-masks --model '" +
            asset_path("models/flatten.safetensors") + "' --out OUT",
        "eval.json"}},
      {"eval-models",
       {"eval --samples 2 --models '" + asset_path("models/flatten.safetensors") + "' --out OUT", "eval.json"}},
      {"eval-images",
       {"eval --images GLYPHS --boxes GLYPHS/labels.csv --labels GLYPHS/labels.csv --methods gradcam,attention "
        "--steps 4 --model '" +
            asset_path("models/flatten.safetensors") + "' --out OUT",
        "eval.json"}},
  };
  // Each analysis's files by the example its entry gives (the bundled model and image unless it
  // names others; DIR: a folder of glyph images).
  static const bool examples_added = [] {
    for (const AnalysisEntry& entry : analysis_registry())
      for (const AnalysisOutput& output : entry.outputs)
        runs[output.schema.kind] = {replaced(replaced(output.example, "assets/", asset_path("")), "DIR", "GLYPHS"),
                                    output.schema.file};
    return true;
  }();
  (void)examples_added;
  return runs;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

TEST(OutputSchemas, EveryKindIsDocumentedWithItsFileAndNumber) {
  const SchemaDocument& document = schema_document();
  std::set<std::string> registered;
  for (const OutputSchema& schema : every_schema()) {
    SCOPED_TRACE(schema.kind);
    registered.insert(schema.kind);
    const auto section = document.kinds.find(schema.kind);
    ASSERT_NE(section, document.kinds.end()) << "docs/output_schemas.md has no section for it";
    EXPECT_EQ(section->second.file, schema.file);
    EXPECT_EQ(section->second.version, schema.version);
    EXPECT_FALSE(expanded_rows(document, section->second.rows).empty());
    EXPECT_TRUE(kind_runs().count(schema.kind)) << "no command in this test writes it";
  }
  for (const auto& [kind, section] : document.kinds) EXPECT_TRUE(registered.count(kind)) << kind;
  EXPECT_EQ(with_schema(nlohmann::json::object(), "run").at("schema_kind"), "run");
  EXPECT_THROW(summary_schema("no-such-kind"), std::logic_error);
}

// The checker itself: a renamed, an extra and a missing key are each found, and keys under an
// absent optional key or in an empty array are not required.
TEST(OutputSchemas, CheckerFindsRenamedExtraAndMissingKeys) {
  const SchemaDocument document = parse_schema_document(
      "## `toy`: toy.json, schema 2\n\n| key | when | meaning |\n|---|---|---|\n"
      "| `schema_kind` | always | |\n| `schema` | always | |\n| `layers[].ranks[].rank` | always | |\n"
      "| `extra` | with --extra | block `inner` |\n| `free.*` | always | anything |\n"
      "## Block `inner`\n\n| key | when | meaning |\n|---|---|---|\n| `value` | always | |\n");
  const nlohmann::json good = {{"schema_kind", "toy"},
                               {"schema", 2},
                               {"layers", {{{"ranks", {{{"rank", 3}}}}}}},
                               {"free", {{"whatever", {{"deep", 1}}}}}};
  EXPECT_TRUE(schema_problems(document, "toy", good).empty());
  nlohmann::json empty_layers = good;
  empty_layers["layers"] = nlohmann::json::array();
  EXPECT_TRUE(schema_problems(document, "toy", empty_layers).empty());

  nlohmann::json renamed = good;
  renamed["layers"][0]["heads"] = renamed["layers"][0]["ranks"];
  renamed["layers"][0].erase("ranks");
  const std::vector<std::string> problems = schema_problems(document, "toy", renamed);
  ASSERT_EQ(problems.size(), 3u);  // heads and heads[].rank undocumented, ranks[].rank missing
  EXPECT_NE(problems[0].find("'layers[].heads'"), std::string::npos) << problems[0];
  EXPECT_NE(problems[2].find("'layers[].ranks[].rank' is missing"), std::string::npos) << problems[2];

  nlohmann::json with_extra = good;
  with_extra["extra"] = nlohmann::json::object();
  EXPECT_EQ(schema_problems(document, "toy", with_extra),
            std::vector<std::string>{"documented key 'extra.value' is missing"});
  with_extra["extra"]["value"] = 1;
  with_extra["schema"] = 1;
  EXPECT_EQ(schema_problems(document, "toy", with_extra), std::vector<std::string>{"schema is not 2"});
}

class KindFile : public ::testing::TestWithParam<std::string> {};

TEST_P(KindFile, HasEveryDocumentedKeyAndNoOther) {
  const std::string& kind = GetParam();
  const KindRun& kind_run = kind_runs().at(kind);
  TestFolder folder("schema");
  std::string arguments = replaced(kind_run.arguments, "OUT", folder.file("out"));
  if (arguments.find("GLYPHS") != std::string::npos) {
    const CommandRun glyphs = run_attnscope("glyphs --count 3 --out " + folder.file("glyphs"), folder.path());
    ASSERT_EQ(glyphs.exit_code, 0) << glyphs.err;
    arguments = replaced(arguments, "GLYPHS", folder.file("glyphs"));
  }
  // CLIP and PROMPTS: a random-weight CLIP with its vocabulary and a prompt file (clip_maps_cases).
  const std::string clip_cases = std::string(ATTNSCOPE_TEST_DATA_DIR) + "/clip_maps_cases/";
  arguments = replaced(arguments, "--model CLIP ", "--model '" + clip_cases + "openai/clip.pt' ");
  arguments = replaced(arguments, "--prompts PROMPTS", "--prompts '" + clip_cases + "prompts.txt'");
  // SIGLIP: a random-weight SigLIP 2 B/16 in timm's hub layout, its attention-pool head (eva_cases).
  arguments = replaced(arguments, "--model SIGLIP ",
                       "--model '" + std::string(ATTNSCOPE_TEST_DATA_DIR) + "/eva_cases/siglip2_b16' ");
  const CommandRun command = run_attnscope(arguments + " --device cpu", folder.path());
  ASSERT_EQ(command.exit_code, 0) << arguments << "\n" << command.err;
  const nlohmann::json file = read_json_file(folder.path() / "out" / kind_run.file);
  for (const std::string& problem : schema_problems(schema_document(), kind, file)) ADD_FAILURE() << problem;
}

std::vector<std::string> registered_kinds() {
  std::vector<std::string> kinds;
  for (const OutputSchema& schema : every_schema()) kinds.push_back(schema.kind);
  return kinds;
}

INSTANTIATE_TEST_SUITE_P(EveryKind, KindFile, ::testing::ValuesIn(registered_kinds()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return replaced(info.param, "-", "_");
                         });

}  // namespace test_output_schemas
}  // namespace attnscope
