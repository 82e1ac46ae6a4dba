#include "models/residual_hooks.h"

#include <stdexcept>

#include "core/excerpt.h"

namespace attnscope {

namespace {

struct SiteName {
  StreamSite site;
  const char* hook;
};
constexpr SiteName kSiteNames[] = {{StreamSite::ResidPre, "hook_resid_pre"},
                                   {StreamSite::AttnOut, "hook_attn_out"},
                                   {StreamSite::ResidMid, "hook_resid_mid"},
                                   {StreamSite::MlpOut, "hook_mlp_out"},
                                   {StreamSite::ResidPost, "hook_resid_post"}};

const char* kPointForms =
    "blocks.L.hook_resid_pre, blocks.L.hook_attn_out, blocks.L.hook_resid_mid, blocks.L.hook_mlp_out, "
    "blocks.L.hook_resid_post or blocks.L (the block's output)";

}  // namespace

std::string stream_point_name(const StreamPoint& point) {
  for (const SiteName& name : kSiteNames)
    if (name.site == point.site) return "blocks." + std::to_string(point.layer) + "." + name.hook;
  throw std::logic_error("a stream site without a name");
}

StreamPoint parse_stream_point(const std::string& text) {
  const std::string prefix = "blocks.";
  auto refuse = [&]() {
    return std::invalid_argument("'" + excerpt(text) + "' is not a point of the residual stream (expected " +
                                 kPointForms + ")");
  };
  if (text.compare(0, prefix.size(), prefix) != 0) throw refuse();
  size_t end = prefix.size();
  while (end < text.size() && end - prefix.size() < 6 && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  if (end == prefix.size() || (end < text.size() && text[end] != '.')) throw refuse();
  StreamPoint point;
  point.layer = std::stoi(text.substr(prefix.size(), end - prefix.size()));
  if (end == text.size()) return point;  // timm's module name: the block's output
  const std::string hook = text.substr(end + 1);
  for (const SiteName& name : kSiteNames)
    if (hook == name.hook) {
      point.site = name.site;
      return point;
    }
  throw refuse();
}

}  // namespace attnscope
