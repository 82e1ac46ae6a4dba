// What the layout readers (models/checkpoint_layouts*.cpp) share: key renames, the Hugging Face
// preprocessor, where a path's configs are.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint.h"

namespace attnscope {

struct LayoutFacts;

namespace layouts {

bool starts_with(const std::string& text, const std::string& prefix);
bool any_key_starts_with(const Checkpoint& checkpoint, const std::string& prefix);
// The folder a weights path's configs sit in: the path itself when it is a folder.
std::filesystem::path folder_of(const std::string& path);
// Moves every tensor whose key starts with `from` to `to` + the rest of the key.
void rename_prefix(Checkpoint& checkpoint, const std::string& from, const std::string& to);
// Renames by a table of (source prefix -> timm prefix); the first matching pair wins.
void rename_keys(Checkpoint& checkpoint, const std::vector<std::pair<std::string, std::string>>& table);
using NameTable = std::vector<std::pair<std::string, std::string>>;
// "<blocks>N.<rest>" as timm's "blocks.N.<rest renamed by the first matching prefix pair>", or
// empty when `key` is not under `blocks` or no pair matches.
std::string block_key(const std::string& key, const std::string& blocks, const NameTable& table);
// Every key under `blocks` renamed by block_key (the others kept).
void rename_blocks(Checkpoint& checkpoint, const std::string& blocks, const NameTable& table);
// In every key, each `from` of the table (its first occurrence) replaced by its `to`.
void replace_in_keys(Checkpoint& checkpoint, const NameTable& table);
// A Hugging Face image processor's preprocessor_config.json: mean, std, resize, crop and filter.
void read_hf_preprocessor(const std::filesystem::path& folder, LayoutFacts& facts);

}  // namespace layouts
}  // namespace attnscope
