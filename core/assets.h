// Locating bundled assets (default model, sample images, class names) from a build tree or a
// clean clone, and reading class-name lists.
#pragma once

#include <string>
#include <vector>

namespace attnscope {

// Path of a file under assets/: $ATTNSCOPE_ASSETS first, then the source tree the binary was
// built from. Throws std::runtime_error naming where it looked when the file is absent.
std::string asset_path(const std::string& relative);

// The bundled demo model the app opens by default: FLatten (focused linear attention with its
// depthwise conv), the best of the six on the demo task. Empty when assets/models has none.
std::string default_model_path();

// The bundled sample image the app opens by default: a held-out image of the demo task.
std::string default_image_path();

// One class name per line; a line "synset<TAB>names" keeps the names.
std::vector<std::string> read_class_names(const std::string& path);

// A file of the checkout attnscope was built from ("bench/pytorch_forward.py"), and the Python with
// torch its configure found: compiled into core/assets.cpp alone, so every other object is the same
// in every checkout (and shared through ccache).
std::string source_path(const std::string& relative);
std::string configured_python();

}  // namespace attnscope
