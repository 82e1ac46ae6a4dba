#include "core/cv_image.h"
#include "core/output_files.h"

namespace attnscope {

void OutputFiles::add_png(const std::string& name, const cv::Mat& rgb) { add_png(name, to_rgb_image(rgb)); }

}  // namespace attnscope
