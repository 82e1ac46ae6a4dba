// Where the workbench's Export button writes when no folder is given: beside the session file when
// there is one (<session folder>/figures), else a per-user folder
// ($XDG_DATA_HOME/attnscope/figures, or ~/.local/share/attnscope/figures), never the source tree.
#pragma once

#include <string>

namespace attnscope {

std::string default_export_folder(const std::string& session_path);

}  // namespace attnscope
