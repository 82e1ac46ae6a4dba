#include "session/app_state.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/excerpt.h"
#include "models/token_layout.h"

namespace attnscope {

namespace {

// Whole non-negative numbers of at most 6 digits.
bool small_number(const std::string& text) {
  return !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

QuerySpec QuerySpec::parse(const std::string& text) {
  QuerySpec query;
  const auto comma = text.find(',');
  if (text == "cls") {
    query.kind = Kind::Class;
  } else if (text == "dist") {
    query.kind = Kind::Distillation;
  } else if (text.rfind("reg", 0) == 0 && small_number(text.substr(3)) && text.size() < 9) {
    query.kind = Kind::Register;
    query.index = std::stoi(text.substr(3));
  } else if (comma != std::string::npos && small_number(text.substr(0, comma)) &&
             small_number(text.substr(comma + 1))) {
    query = patch(std::stoi(text.substr(0, comma)), std::stoi(text.substr(comma + 1)));
  } else {
    throw std::invalid_argument("--query expects cls, dist, regN or ROW,COL, got '" + excerpt(text) + "'");
  }
  return query;
}

QuerySpec QuerySpec::patch(int row, int col) {
  QuerySpec query;
  query.kind = Kind::Patch;
  query.row = row;
  query.col = col;
  return query;
}

std::string QuerySpec::text() const {
  switch (kind) {
    case Kind::Class:
      return "cls";
    case Kind::Distillation:
      return "dist";
    case Kind::Register:
      return "reg" + std::to_string(index);
    case Kind::Patch:
      break;
  }
  return std::to_string(row) + "," + std::to_string(col);
}

const std::vector<EnumEntry<HeadView>>& EnumTable<HeadView>::entries() {
  static const std::vector<EnumEntry<HeadView>> table = {
      {HeadView::Head, "head", nullptr}, {HeadView::Mean, "mean", nullptr}, {HeadView::Heads, "heads", nullptr}};
  return table;
}

const std::vector<EnumEntry<MapDirection>>& EnumTable<MapDirection>::entries() {
  static const std::vector<EnumEntry<MapDirection>> table = {
      {MapDirection::Out, "out", "out: where the query looks"},
      {MapDirection::In, "in", "in: how much patches look at it"}};
  return table;
}

const std::vector<EnumEntry<RankMode>>& EnumTable<RankMode>::entries() {
  static const std::vector<EnumEntry<RankMode>> table = {{RankMode::Auto, "auto", nullptr},
                                                         {RankMode::Exact, "exact", nullptr},
                                                         {RankMode::Leading, "leading", nullptr},
                                                         {RankMode::None, "none", nullptr}};
  return table;
}

const std::vector<EnumEntry<MatrixFile>>& EnumTable<MatrixFile>::entries() {
  static const std::vector<EnumEntry<MatrixFile>> table = {
      {MatrixFile::Auto, "auto", nullptr}, {MatrixFile::On, "on", nullptr}, {MatrixFile::Off, "off", nullptr}};
  return table;
}

const std::vector<EnumEntry<LcmView>>& EnumTable<LcmView>::entries() {
  static const std::vector<EnumEntry<LcmView>> table = {{LcmView::Before, "before", nullptr},
                                                        {LcmView::After, "after", nullptr}};
  return table;
}

const std::vector<EnumEntry<FocusVectors>>& EnumTable<FocusVectors>::entries() {
  static const std::vector<EnumEntry<FocusVectors>> table = {{FocusVectors::Keys, "keys", nullptr},
                                                             {FocusVectors::Queries, "queries", nullptr}};
  return table;
}

namespace {

std::string joined(std::initializer_list<std::string> parts) {
  std::string key;
  for (const auto& part : parts) key += part + "|";
  return key;
}

}  // namespace

std::string InputSelection::key() const {
  return joined({model, image, arch, config, device, to_string(input_settings()), std::to_string(max_pixels)});
}

std::string ViewSelection::key() const {
  return joined({std::to_string(layer), std::to_string(head), query.text(), enum_name(view), enum_name(direction),
                 std::to_string(windows), enum_name(lcm), box});
}

MethodSelection parse_method_selection(const std::string& text, const std::string& option) {
  MethodSelection selection;
  selection.dino_masks = text == "dino-masks";
  // DINO's masks are scored against object masks by Jaccard, not as an attribution map: alone.
  if (!selection.dino_masks && ("," + text + ",").find(",dino-masks,") != std::string::npos)
    throw std::invalid_argument(option + " " + text.substr(0, 80) +
                                ": dino-masks runs alone (scored by Jaccard against object masks, not as an "
                                "attribution map); run the other methods in a second eval");
  selection.every = text == "all";
  selection.methods = selection.dino_masks ? std::vector<AttributionMethod>{} : parse_method_list(text, option);
  return selection;
}

std::string to_string(const MethodSelection& selection) {
  return selection.dino_masks ? "dino-masks" : selection.every ? "all" : to_string(selection.methods);
}

std::string AnalysisOptionValues::key() const {
  std::string key;
  for (const auto& [name, value] : values_) key += name + "=" + value.text + ";";
  return key;
}

std::string AnalysisSettings::key() const {
  const std::string extra = options.key();
  return joined({analysis, to_string(target), gradcam_layer, to_string(fusion), format_double(discard),
                 to_string(method), to_string(methods), std::to_string(steps), to_string(replacement),
                 std::to_string(ig_steps), to_string(ig_baseline), enum_name(fp_vectors), enum_name(fp_projection),
                 enum_name(ranks), extra});
}

std::string DisplaySettings::key() const {
  return joined({to_string(colormap), to_string(scale), format_double(opacity), to_string(alpha)});
}

std::vector<PanelSpec> AppState::panel_specs() const {
  PanelSpec first;
  first.model = model;
  first.variant = attention.variant;
  std::vector<PanelSpec> specs = {first};
  for (const PanelSpec& spec : compare) {
    specs.push_back(spec);
    if (specs.back().model.empty()) specs.back().model = model;
  }
  return specs;
}

std::vector<PanelSpec> AppState::panels_as_figure_rows() const {
  std::vector<PanelSpec> rows = panel_specs();
  rows.front().model.clear();
  for (PanelSpec& row : rows)
    if (row.model == model) row.model.clear();
  return rows;
}

std::vector<AttentionSettings> AppState::panel_settings() const {
  std::vector<AttentionSettings> panels;
  for (const PanelSpec& spec : panel_specs()) panels.push_back(spec.settings(attention));
  return panels;
}

std::vector<int> parse_index_list(const std::string& name, const std::string& text) {
  if (text == "all") return {};
  std::vector<int> indices;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) indices.push_back(parse_int_option(name, item));
  if (indices.empty() || text.back() == ',')
    throw std::invalid_argument("--" + name + " expects all or a comma-separated list, got '" + excerpt(text) + "'");
  return indices;
}

std::vector<VariantChoice> variant_rows(const std::vector<PanelSpec>& specs, const AttentionSettings& base) {
  if (specs.empty()) return {{to_string(base.variant), base, ""}};
  std::vector<VariantChoice> choices;
  for (const PanelSpec& spec : specs) choices.push_back({spec.label(), spec.settings(base), spec.model});
  return choices;
}

std::vector<VariantChoice> parse_variant_list(const std::string& text, const AttentionSettings& base) {
  return variant_rows(parse_panel_list(text, "--variants"), base);
}

std::string index_list_text(const std::vector<int>& indices) {
  std::string text;
  for (int index : indices) text += (text.empty() ? "" : ",") + std::to_string(index);
  return text.empty() ? "all" : text;
}

int resolve_layer_index(int layer, int depth, const std::string& option) {
  const int resolved = layer < 0 ? depth + layer : layer;
  if (resolved < 0 || resolved >= depth)
    throw std::invalid_argument(option + " " + std::to_string(layer) + ": the model has " + std::to_string(depth) +
                                " blocks (0.." + std::to_string(depth - 1) + ")");
  return resolved;
}

void check_head_index(int head, int heads, const std::string& option) {
  if (heads == 0)
    throw std::invalid_argument(option + " " + std::to_string(head) +
                                ": this layer computes no attention (a block without it, such as CARE's strip "
                                "convolutions, still counts as a layer); choose another --layer");
  if (head < 0 || head >= heads)
    throw std::invalid_argument(option + " " + std::to_string(head) + ": this layer has " + std::to_string(heads) +
                                (heads == 1 ? " head (0)" : " heads (0.." + std::to_string(heads - 1) + ")") +
                                " (the stages of a hierarchical model differ: attnscope info lists each layer's)");
}

ResolvedQuery resolve_query(const QuerySpec& query, const TokenLayout& layout) {
  ResolvedQuery resolved;
  switch (query.kind) {
    case QuerySpec::Kind::Class:
      if (layout.has_class_token) return resolved;
      resolved.token = layout.patch_token(layout.grid_h / 2, layout.grid_w / 2);
      resolved.note = "the model has no class token: using the centre patch";
      return resolved;
    case QuerySpec::Kind::Distillation:
      if (!layout.has_dist_token) throw std::invalid_argument("--query dist: the model has no distillation token");
      resolved.token = int(layout.has_class_token);
      return resolved;
    case QuerySpec::Kind::Register:
      if (query.index >= layout.register_tokens)
        throw std::invalid_argument("--query " + query.text() + ": " +
                                    (layout.register_tokens == 0
                                         ? std::string("the model has no register tokens")
                                         : "the model has " + std::to_string(layout.register_tokens) +
                                               " register tokens (reg0 .. reg" +
                                               std::to_string(layout.register_tokens - 1) + ")"));
      resolved.token = int(layout.has_class_token) + int(layout.has_dist_token) + query.index;
      return resolved;
    case QuerySpec::Kind::Patch:
      break;
  }
  if (query.row >= layout.grid_h || query.col >= layout.grid_w)
    throw std::invalid_argument("--query " + query.text() + " is outside the " + std::to_string(layout.grid_h) + "x" +
                                std::to_string(layout.grid_w) + " patch grid");
  resolved.token = layout.patch_token(query.row, query.col);
  return resolved;
}

}  // namespace attnscope
