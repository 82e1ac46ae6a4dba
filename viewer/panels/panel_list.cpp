// The one list of workbench panels (each defined in its own file).
#include "viewer/panels/panel.h"

namespace attnscope {

std::unique_ptr<Panel> make_controls_panel();
std::unique_ptr<Panel> make_attention_panel();
std::unique_ptr<Panel> make_matrix_panel();
std::unique_ptr<Panel> make_status_panel();

std::vector<std::unique_ptr<Panel>> make_panels() {
  std::vector<std::unique_ptr<Panel>> panels;
  panels.push_back(make_controls_panel());
  panels.push_back(make_attention_panel());
  panels.push_back(make_matrix_panel());
  panels.push_back(make_status_panel());
  return panels;
}

}  // namespace attnscope
