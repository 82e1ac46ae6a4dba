#include "session/app_state.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/excerpt.h"
#include "models/token_layout.h"

namespace attnscope {

bool parse_patch_query(const std::string& text, int& row, int& col) {
  const auto comma = text.find(',');
  if (comma == std::string::npos) return false;
  const std::string first = text.substr(0, comma), second = text.substr(comma + 1);
  for (const auto& part : {first, second})
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos) return false;
  row = std::stoi(first);
  col = std::stoi(second);
  return true;
}

int parse_int_option(const std::string& name, const std::string& value) {
  try {
    size_t used = 0;
    const int parsed = std::stoi(value, &used);
    if (used == value.size()) return parsed;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + name + " expects an integer, got '" + excerpt(value) + "'");
}

std::string format_double(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

double parse_double_option(const std::string& name, const std::string& value) {
  try {
    size_t used = 0;
    const double parsed = std::stod(value, &used);
    if (used == value.size()) return parsed;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("--" + name + " expects a number, got '" + excerpt(value) + "'");
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
  return joined({model, image, arch, config, device, to_string(resize), input_size, crop, interpolation, mean, std,
                 std::to_string(max_pixels)});
}

std::string ViewSelection::key() const {
  return joined({std::to_string(layer), std::to_string(head), query, enum_name(view), enum_name(direction),
                 std::to_string(windows), enum_name(lcm)});
}

std::string AnalysisSettings::key() const {
  std::string extra;
  for (const auto& [name, value] : options) extra += name + "=" + value + ";";
  return joined({analysis, std::to_string(target_class), gradcam_layer, to_string(fusion), format_double(discard), box,
                 method, methods, std::to_string(steps), replacement, std::to_string(ig_steps), ig_baseline,
                 enum_name(fp_vectors), enum_name(fp_projection), enum_name(ranks), enum_name(matrix), extra});
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

std::vector<AttentionSettings> AppState::panel_settings() const {
  std::vector<AttentionSettings> panels;
  for (const PanelSpec& spec : panel_specs()) panels.push_back(spec.settings(attention));
  return panels;
}

void set_option(AppState& state, const std::string& name, const std::string& value) {
  const OptionSpec* option = find_option(name);
  if (!option) throw std::invalid_argument("unknown option --" + excerpt(name));
  // Paths are the longest values (PATH_MAX is 4096); anything longer is not an option value.
  if (value.size() > kMaxOptionValueBytes)
    throw std::invalid_argument("--" + name + ": the value is " + std::to_string(value.size()) +
                                " bytes long, at most " + std::to_string(kMaxOptionValueBytes) + " are accepted");
  option->set(state, value);
}

nlohmann::json to_json(const AppState& state) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& option : app_options()) {
    const std::string value = option.get(state);
    if (!option.panel_list) {
      json[option.name] = value;
      continue;
    }
    // Panel lists as objects: readable, and paths with ',' or ':' stay intact (the compare specs
    // are taken as they are, not through their text).
    json[option.name] = nlohmann::json::array();
    const std::vector<PanelSpec> specs =
        option.name == "compare" ? state.compare : parse_panel_list(value, "--" + option.name);
    for (const PanelSpec& spec : specs) json[option.name].push_back(to_json(spec));
  }
  return json;
}

void apply_json(AppState& state, const nlohmann::json& json) {
  if (!json.is_object()) throw std::invalid_argument("a session must be a JSON object");
  for (const auto& item : json.items()) {
    const auto& value = item.value();
    std::string text;
    const OptionSpec* option = find_option(item.key());
    if (option && option->panel_list && value.is_array()) {
      std::vector<PanelSpec> specs;
      for (const auto& entry : value) specs.push_back(panel_spec_from_json(entry, "--" + item.key()));
      if (item.key() == "compare") {
        // Set directly: paths may hold the text form's separators.
        if (int(specs.size()) > kMaxPanels - 1)
          throw std::invalid_argument("--compare takes at most " + std::to_string(kMaxPanels - 1) + " panels, got " +
                                      std::to_string(specs.size()));
        state.compare = specs;
        continue;
      }
      text = to_string(specs);
    } else if (value.is_string())
      text = value.get<std::string>();
    else if (value.is_boolean())  // the switches' own words
      text = value.get<bool>() ? "on" : "off";
    else if (value.is_number())
      text = value.dump();
    else
      throw std::invalid_argument("session key '" + excerpt(item.key()) + "' must be a string or a number");
    set_option(state, item.key(), text);
  }
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

std::vector<VariantChoice> parse_variant_list(const std::string& text, const AttentionSettings& base) {
  if (text.empty()) return {{to_string(base.variant), base, ""}};
  std::vector<VariantChoice> choices;
  for (const PanelSpec& spec : parse_panel_list(text, "--variants"))
    choices.push_back({spec.label(), spec.settings(base), spec.model});
  return choices;
}

int resolve_layer_index(int layer, int depth) {
  const int resolved = layer < 0 ? depth + layer : layer;
  if (resolved < 0 || resolved >= depth)
    throw std::invalid_argument("--layer " + std::to_string(layer) + ": the model has " + std::to_string(depth) +
                                " blocks (0.." + std::to_string(depth - 1) + ")");
  return resolved;
}

void check_head_index(int head, int heads) {
  if (heads == 0)
    throw std::invalid_argument("--head " + std::to_string(head) +
                                ": this layer computes no attention (a block without it, such as CARE's strip "
                                "convolutions, still counts as a layer); choose another --layer");
  if (head < 0 || head >= heads)
    throw std::invalid_argument("--head " + std::to_string(head) + ": the model has " + std::to_string(heads) +
                                " heads (0.." + std::to_string(heads - 1) + ")");
}

ResolvedQuery resolve_query(const std::string& query, const TokenLayout& layout) {
  ResolvedQuery resolved;
  if (query == "cls") {
    if (layout.has_class_token) return resolved;
    resolved.token = layout.patch_token(layout.grid_h / 2, layout.grid_w / 2);
    resolved.note = "the model has no class token: using the centre patch";
    return resolved;
  }
  if (query == "dist") {
    if (!layout.has_dist_token) throw std::invalid_argument("--query dist: the model has no distillation token");
    resolved.token = int(layout.has_class_token);
    return resolved;
  }
  if (query.rfind("reg", 0) == 0) {
    const std::string number = query.substr(3);
    const bool digits =
        !number.empty() && number.size() < 6 && number.find_first_not_of("0123456789") == std::string::npos;
    const int index = digits ? std::stoi(number) : -1;
    if (index < 0 || index >= layout.register_tokens)
      throw std::invalid_argument("--query " + query.substr(0, 40) + ": " +
                                  (layout.register_tokens == 0
                                       ? std::string("the model has no register tokens")
                                       : "the model has " + std::to_string(layout.register_tokens) +
                                             " register tokens (reg0 .. reg" +
                                             std::to_string(layout.register_tokens - 1) + ")"));
    resolved.token = int(layout.has_class_token) + int(layout.has_dist_token) + index;
    return resolved;
  }
  int row = 0, col = 0;
  if (!parse_patch_query(query, row, col))
    throw std::invalid_argument("--query expects cls, dist, regN or ROW,COL, got '" + excerpt(query) + "'");
  if (row < 0 || row >= layout.grid_h || col < 0 || col >= layout.grid_w)
    throw std::invalid_argument("--query " + excerpt(query) + " is outside the " + std::to_string(layout.grid_h) + "x" +
                                std::to_string(layout.grid_w) + " patch grid");
  resolved.token = layout.patch_token(row, col);
  return resolved;
}

}  // namespace attnscope
