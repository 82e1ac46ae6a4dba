// `attnscope eval --images DIR ...`: attribution methods of any checkpoint scored on a folder of
// images with known objects (masks or boxes) and optional labels. See app/eval_folder.cpp.
#pragma once

#include "app/cli.h"

namespace attnscope {

// The flags it reads: images, masks, boxes, labels, layers; and the state's model, methods, steps,
// replacement, input and attention options.
int eval_folder(const CommandLine& line);

}  // namespace attnscope
