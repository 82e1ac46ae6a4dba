// Sections of the sidebar (viewer/panels/controls_panel.cpp) that have files of their own: the
// figure export and the image preprocessing. Each draws inside the sidebar's window.
#pragma once

#include <string>

namespace attnscope {

class Workbench;

// A text field for an option that takes effect on Enter, through the option table (so it accepts
// what the flag does); a bad value is reported and the state keeps its old one.
void option_field(Workbench& bench, const char* label, const char* option, std::string& edited);

// The export section's own fields: the folder (empty: the default, see session/export_folder.h)
// and the text of the list fields while they are being edited.
struct ExportFields {
  std::string folder, layers, heads;
};
void draw_export_section(Workbench& bench, ExportFields& fields);

// Resize, crop, interpolation, mean and std, each defaulting to the checkpoint's, and what panel 1
// used.
struct InputFields {
  std::string crop, mean, std;
};
void draw_input_section(Workbench& bench, InputFields& fields);

}  // namespace attnscope
